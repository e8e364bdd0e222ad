"""The TypeError of converting a tracer to a numpy array names what to call:
the tapead equivalent of the scipy function that converted it, a pointer to
tapead.scipy for other scipy functions, np.stack for everything else."""
import numpy as np
import pytest
import scipy.integrate
import scipy.linalg
import scipy.signal
import scipy.special

import tapead as ta
import tapead.numpy as tnp
import tapead.scipy.linalg as tsl
import tapead.scipy.special as tsp

A = np.array([[2.0, 0.3, 0.1], [0.2, 3.0, 0.4], [0.1, 0.5, 4.0]])

KNOWN = [
    ("scipy.special.logsumexp", lambda x: scipy.special.logsumexp(x),
     "tapead.scipy.special.logsumexp", lambda x: tsp.logsumexp(x)),
    ("scipy.special.softmax", lambda x: scipy.special.softmax(x)[0, 0],
     "tapead.scipy.special.softmax", lambda x: tsp.softmax(x)[0, 0]),
    ("scipy.linalg.solve_triangular",
     lambda x: scipy.linalg.solve_triangular(x, np.ones(3)).sum(),
     "tapead.scipy.linalg.solve_triangular",
     lambda x: tsl.solve_triangular(x, np.ones(3)).sum()),
    ("scipy.linalg.expm", lambda x: scipy.linalg.expm(x).sum(),
     "tapead.scipy.linalg.expm", lambda x: tsl.expm(x).sum()),
    ("scipy.linalg.cho_factor", lambda x: scipy.linalg.cho_factor(x)[0][0, 0],
     "tapead.scipy.linalg.cho_factor", lambda x: tsl.cho_factor(x)[0][0, 0]),
    ("scipy.linalg.solve", lambda x: scipy.linalg.solve(x, np.ones(3)).sum(),
     "tapead.numpy.linalg.solve", lambda x: np.linalg.solve(x, np.ones(3)).sum()),
    ("scipy.integrate.trapezoid", lambda x: scipy.integrate.trapezoid(x).sum(),
     "np.trapezoid", lambda x: np.trapezoid(x).sum()),
]


@pytest.mark.parametrize("name, scipy_f, target, tapead_f", KNOWN,
                         ids=[k[0] for k in KNOWN])
def test_scipy_function_on_a_tracer_names_the_tapead_one(name, scipy_f, target, tapead_f):
    with pytest.raises(TypeError) as info:
        ta.grad(scipy_f)(A)
    msg = str(info.value)
    assert msg.startswith(f"{name} cannot see through tapead tracers")
    assert f"call {target}" in msg
    # ... and the suggestion works (same value as scipy's, derivatives checked)
    np.testing.assert_allclose(tapead_f(A), scipy_f(A), rtol=1e-14)
    ta.check_grads(tapead_f, (A,), order=2)


def test_other_scipy_functions_point_to_tapead_scipy():
    with pytest.raises(TypeError, match=r"^scipy\.signal\.\w+ cannot see through.*"
                                        r"tapead\.scipy\.special, tapead\.scipy\.linalg "
                                        r"and tapead\.scipy\.stats"):
        ta.grad(lambda x: scipy.signal.convolve(x, np.ones((2, 2))).sum())(A)


def test_plain_conversion_keeps_the_generic_message():
    with pytest.raises(TypeError) as info:
        ta.grad(lambda x: np.asarray(x).sum())(A)
    msg = str(info.value)
    assert msg.startswith("a traced value cannot be turned into a numpy array: that would "
                          "drop its derivative")
    assert "np.stack" in msg and "tapead.scipy.linalg" in msg


def test_logsumexp_is_documented_and_exported():
    assert "logsumexp" in tsp.__all__ and tsp.logsumexp.__doc__.count("Parameters") == 1
    assert tnp.sum is not None                     # the numpy layer loads with tapead.scipy
    assert ta.grad(lambda x: tsp.logsumexp(x))(np.zeros(4)).tolist() == [0.25] * 4
