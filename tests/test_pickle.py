"""ta.jit functions and ta.record recordings pickle (so they travel to Dask
workers), and a process that unpickles one keeps one object per token, so its
recordings are shared and each signature is recorded once."""
import pickle
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import tapead as ta
import tapead.scaly as sc
from tapead import program

cloudpickle = pytest.importorskip("cloudpickle")


def cube_sum(x):
    return (x ** 3).sum()


def branchy(x):
    return x * x if x > 0 else -x


def _in_subprocess(payload: bytes, code: str) -> str:
    """Run ``code`` with ``f`` unpickled from ``payload`` in a fresh interpreter."""
    src = "import pickle, sys\nimport numpy as np\nf = pickle.loads(sys.stdin.buffer.read())\n"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(     # this module, for its functions
        [str(pathlib.Path(__file__).parent)] + os.environ.get("PYTHONPATH", "").split(os.pathsep)))
    out = subprocess.run([sys.executable, "-c", src + code], input=payload,
                         capture_output=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr.decode()
    return out.stdout.decode().strip()


def test_jit_round_trip_in_process_is_the_same_object():
    f = ta.jit(cube_sum)
    f(np.ones(3))
    g = pickle.loads(pickle.dumps(f))                  # standard pickle: f is importable
    assert g is f
    assert g.cache_info().misses == 1
    h = ta.jit(lambda x: np.sin(x).sum())              # a lambda needs cloudpickle
    with pytest.raises((pickle.PicklingError, AttributeError)):
        pickle.dumps(h)
    assert cloudpickle.loads(cloudpickle.dumps(h)) is h


def test_jit_round_trip_in_a_subprocess_records_each_signature_once():
    f = ta.jit(ta.grad(lambda x: (x ** 3).sum()))       # a derivative's function pickles too
    payload = cloudpickle.dumps(f)
    code = ("print(f(np.arange(3.0)).tolist(), f(np.ones(3)).tolist())\n"
            "import cloudpickle\ng = pickle.loads(cloudpickle.dumps(f))\n"
            "print(g is f, tuple(f.cache_info()[:2]))")
    lines = _in_subprocess(payload, code).splitlines()
    assert lines[0] == "[0.0, 3.0, 12.0] [3.0, 3.0, 3.0]"
    assert lines[1] == "True (1, 1)"                   # one recording, one replay


def test_two_unpicklings_in_one_process_share_the_cache():
    f = ta.jit(cube_sum)
    payload = pickle.dumps(f)
    code = ("g = pickle.loads(%r)\n" % payload +
            "f(np.ones(4)); g(np.zeros(4)); g(np.ones(4))\n"
            "print(f is g, f.cache_info().misses, f.cache_info().hits)")
    assert _in_subprocess(payload, code) == "True 1 2"


def test_derivative_attribute_survives_pickling():
    g = ta.grad(lambda x: (x ** 2).sum())
    g2 = cloudpickle.loads(cloudpickle.dumps(g))
    d = program.derivative_of(g2)
    assert d is not None and d.kind == "grad" and d.wrapper() is g2
    np.testing.assert_array_equal(g2(np.array([1.0, 2.0])), [2.0, 4.0])


def test_recording_round_trip():
    rec = ta.record(cube_sum, np.array([1.0, 2.0]))
    assert pickle.loads(pickle.dumps(rec)) is rec
    out = _in_subprocess(pickle.dumps(rec),
                         "v, g = f.value_and_grad(np.array([2.0, 3.0]))\n"
                         "print(float(f(np.array([1.0, 1.0]))), float(v), g.tolist())")
    assert out == "2.0 35.0 [12.0, 27.0]"


def test_recording_keeps_its_guards_after_pickling():
    rec = ta.record(branchy, 2.0)
    out = _in_subprocess(pickle.dumps(rec),
                         "print(float(f(3.0)))\n"
                         "try:\n    f(-1.0)\nexcept Exception as e:\n"
                         "    print(type(e).__name__)")
    assert out.splitlines() == ["9.0", "GuardFlippedError"]


def test_scaly_functions_still_pickle():
    @sc.function(sc.L("x", ()), sc.L("y", ...))
    def f(x):
        return (x * x).sin()
    g = cloudpickle.loads(cloudpickle.dumps(f))
    assert type(g) is type(f)
    assert float(g(1.5)) == pytest.approx(np.sin(2.25), rel=1e-15)
