"""docs/coverage.md is what tools/gen_coverage.py writes from tapead's registry,
and the statuses it lists are what tracers do."""
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import scipy.special as sps

import tapead as ta
from tapead.errors import NonDifferentiableError

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import gen_coverage  # noqa: E402

sys.path.pop(0)


def test_coverage_page_is_current():
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_coverage.py"), "--check"],
                         capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr


def test_missing_rule_error_points_to_the_page():
    with pytest.raises(NonDifferentiableError, match=r"np\.trim_zeros.*docs/coverage\.md"):
        ta.grad(lambda x: np.trim_zeros(x).sum())(np.ones(3))
    with pytest.raises(NonDifferentiableError, match=r"scipy\.special\.dawsn.*docs/coverage"):
        ta.grad(sps.dawsn)(0.5)


def _rows(title):
    return {name: (status, note) for t, _, rows in gen_coverage.sections() if t == title
            for name, status, note in rows}


def test_statuses_are_what_tracers_do():
    npr, spr = _rows("numpy"), _rows("scipy.special")
    assert npr["sin"][0] == "differentiable" and npr["argmax"][0] == "value only"
    assert npr["isnan"][0] == "value only" and npr["trim_zeros"][0] == "refused"
    assert "zero" in npr["floor"][1]
    # every differentiable scipy.special ufunc of one argument differentiates
    for name, (status, _) in spr.items():
        f = getattr(sps, name)
        if status == "differentiable" and isinstance(f, np.ufunc) and f.nin == 1:
            assert np.isfinite(ta.grad(f)(0.3)), name
    assert spr["dawsn"][0] == "refused"
    assert "no derivative in v" in spr["iv"][1]
    st = _rows("scipy.stats")
    assert st["norm.logpdf"][0] == "differentiable" and st["laplace.logpdf"][0] == "refused"
    assert "solve" in _rows("scipy.linalg")["solve"][1]
