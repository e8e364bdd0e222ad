"""The API reference covers every public name, and each has a usable docstring.

The examples themselves run through pytest's doctest collection
(``--doctest-modules``, ``--doctest-glob=*.md``); these tests check that the
reference pages name every public function and that the docstrings carry a
Parameters/Returns description and a ``>>>`` example where the reference
promises one.  The user pages must name things, not where they came from.
"""
import inspect
import pathlib
import re
import subprocess
import sys

import pytest

import tapead as ta
import tapead.nn
import tapead.numpy.linalg as tla
import tapead.optim
import tapead.scaly as sc
import tapead.scipy.special as tsp

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
API = DOCS / "api"

TA_NAMES = ["grad", "value_and_grad", "jvp", "vjp", "jacfwd", "jacrev", "hessian", "hvp",
            "record", "Recording", "stop_gradient", "checkpoint", "scan", "fori_loop",
            "custom_jvp", "custom_vjp", "check_grads", "jacobian_sparsity", "sparse_jacobian",
            "sparse_hessian", "tree_flatten", "tree_unflatten", "tree_map", "while_loop", "cond",
            "switch", "checkpoint_cost", "fixed_point", "custom_root", "vmap", "jit"]
SC_NAMES = [n for n in sc.__all__ if not n.endswith("Error") and n != "dtypes"]
LINALG_NAMES = [n for n in tla.__all__ if n != "LinAlgError"]
# the scipy ufuncs get their docstrings from a factory; the page api/scipy.md
# checks their derivatives instead
SPECIAL_WITH_EXAMPLES = ["logsumexp", "softmax", "log_softmax", "polygamma"]
NN_NAMES = ["mse", "init_mlp", "mlp", "mlp_tape_nbytes"]
OPTIM_NAMES = ["sgd", "sgd_inplace", "Adam"]

WITH_EXAMPLES = ([(ta, n) for n in TA_NAMES] + [(sc, n) for n in SC_NAMES]
                 + [(tla, n) for n in LINALG_NAMES] + [(tsp, n) for n in SPECIAL_WITH_EXAMPLES]
                 + [(tapead.nn, n) for n in NN_NAMES] + [(tapead.optim, n) for n in OPTIM_NAMES])


def _api_text():
    return "\n".join(p.read_text() for p in sorted(API.iterdir())
                     if p.suffix in (".rst", ".md"))


@pytest.mark.parametrize("mod,name", WITH_EXAMPLES,
                         ids=[f"{m.__name__}.{n}" for m, n in WITH_EXAMPLES])
def test_public_name_has_docstring_with_example(mod, name):
    doc = inspect.getdoc(getattr(mod, name)) or ""
    assert doc, f"{mod.__name__}.{name} has no docstring"
    assert ">>>" in doc, f"{mod.__name__}.{name}: the docstring has no >>> example"


@pytest.mark.parametrize("name", ["grad", "value_and_grad", "vjp", "jvp", "jacfwd", "jacrev",
                                  "hessian", "hvp", "record", "scan", "fori_loop",
                                  "check_grads", "tree_map"])
def test_transform_docstrings_have_parameters(name):
    doc = inspect.getdoc(getattr(ta, name))
    assert "Parameters\n----------" in doc, f"ta.{name}: no numpydoc Parameters section"


def test_every_public_name_is_in_the_reference():
    text = _api_text()
    for n in TA_NAMES + ["Tape", "Tracer", "Dual"]:
        assert re.search(rf"::\s+(tapead\.)?{n}\b", text), f"ta.{n} is not in docs/api"
    for n in sc.__all__:
        assert re.search(rf"::\s+{n}\b", text), f"sc.{n} is not in docs/api"
    for mod in ("tapead.errors", "tapead.nn", "tapead.optim", "tapead.testing",
                "tapead.numpy", "tapead.numpy.linalg", "tapead.scipy.special"):
        assert mod in text, f"{mod} has no page in docs/api"


def test_index_lists_every_page():
    index = (DOCS / "index.md").read_text()
    for page in sorted(DOCS.glob("*.md")):
        if page.stem != "index":
            assert re.search(rf"^{page.stem}$", index, re.M), f"{page.name} is not in index.md"


def test_user_docs_name_things_not_their_sources():
    pattern = (r"seed 0[0-9]+|seeds/|\bissue [0-9]|the lab\b|Scaly.s page|vmap issue"
               r"|\bsessions?\b|\bissues?\b")
    hits = []
    for path in sorted(DOCS.rglob("*.md")) + sorted(DOCS.rglob("*.rst")):
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(pattern, line, re.I):
                hits.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not hits, "\n".join(hits)


def test_pytest_does_not_collect_sphinx_config():
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "docs"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "conf.py" not in out.stdout and "_ext" not in out.stdout
    assert "guide.md" in out.stdout
