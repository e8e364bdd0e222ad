"""tapead/compositions/numpy_extra.py and the numpy functions completed with it:
the op-spec rows (tests/opspecs_numpy_extra.py) check the derivatives; here
real_if_close (JAX has no row for it), plain inputs, the guards that a
replayed tape re-checks, and the error messages."""
import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp

X = np.array([0.3, -1.2, 0.7])


def test_real_if_close():
    f = lambda x: np.real_if_close(x * (1.0 + 1e-18j))   # noqa: E731
    out, pull = ta.vjp(f, X)
    assert not np.iscomplexobj(out)
    np.testing.assert_allclose(pull(np.ones(3))[0], np.ones(3), rtol=1e-15)
    out, _ = ta.vjp(lambda x: np.real_if_close(x * (1.0 + 1e-3j)), X)
    assert np.iscomplexobj(out)
    np.testing.assert_allclose(ta.grad(lambda x: np.sum(np.real_if_close(x)))(X), np.ones(3))


def test_plain_inputs_get_numpy_results():
    A = np.arange(6.0).reshape(2, 3)
    assert np.array_equal(tnp.rot90(A), np.rot90(A))
    assert np.array_equal(tnp.r_[A[0], 1.0, 0:2], np.r_[A[0], 1.0, 0:2])
    assert np.array_equal(tnp.c_[A[0], A[1]], np.c_[A[0], A[1]])
    assert np.array_equal(tnp.linalg.multi_dot([A, A.T, A]), np.linalg.multi_dot([A, A.T, A]))
    assert np.array_equal(tnp.partition(A[0][::-1], 1), np.partition(A[0][::-1], 1))


def test_multi_dot_order_and_vector_ends():
    rng = np.random.default_rng(0)
    arrays = [rng.normal(size=s) for s in [(4,), (4, 6), (6, 2), (2, 5), (5,)]]
    f = lambda a: np.linalg.multi_dot([a] + arrays[1:])   # noqa: E731
    out, pull = ta.vjp(f, arrays[0])
    np.testing.assert_allclose(out, np.linalg.multi_dot(arrays), rtol=1e-13)
    assert np.shape(out) == ()


def test_matrix_power_exponents():
    A = np.array([[1.0, 0.5], [0.2, 2.0]])
    for n in (0, 1, 2, 5, -1, -3):
        out, _ = ta.vjp(lambda a: np.linalg.matrix_power(a, n), A)
        np.testing.assert_allclose(out, np.linalg.matrix_power(A, n), rtol=1e-13)
    g = ta.grad(lambda a: np.sum(np.linalg.matrix_power(a, 0)))(A)
    assert np.array_equal(g, np.zeros_like(A))


def test_ufunc_methods_values_and_refusals():
    A = np.array([[0.3, -1.2, 0.7], [1.5, 0.2, -0.4]])
    for name, f in [("maximum.reduce", lambda a: np.maximum.reduce(a, axis=1)),
                    ("subtract.accumulate", lambda a: np.subtract.accumulate(a, axis=1)),
                    ("hypot.outer", lambda a: np.hypot.outer(a[0], a[1])),
                    ("add.reduce initial", lambda a: np.add.reduce(a, axis=0, initial=2.0)),
                    ("maximum.reduce keepdims", lambda a: np.maximum.reduce(a, keepdims=True,
                                                                            axis=None))]:
        out, _ = ta.vjp(f, A)
        np.testing.assert_allclose(out, f(A), rtol=1e-14, err_msg=name)
    with pytest.raises(ValueError, match="not reorderable"):
        ta.grad(lambda a: np.sum(np.subtract.reduce(a, axis=None)))(A)
    with pytest.raises(TypeError, match="where"):
        ta.grad(lambda a: np.sum(np.add.reduce(a, where=a.value > 0)))(A)
    with pytest.raises(TypeError, match="out="):
        ta.grad(lambda a: np.sum(np.add.accumulate(a, out=np.zeros((2, 3)))))(A)
    with pytest.raises(Exception, match="reduceat"):
        ta.grad(lambda a: np.sum(np.add.reduceat(a, [0, 1], axis=1)))(A)


def test_conversion_errors_name_the_fix():
    with pytest.raises(TypeError, match=r"tapead\.numpy\.r_"):
        ta.grad(lambda x: np.sum(np.r_[x, 1.0]))(X)
    with pytest.raises(TypeError, match=r"np\.stack\(values\)"):
        ta.grad(lambda x: np.mean([x[0], x[1]]))(X)
    with pytest.raises(TypeError, match=r"tapead\.numpy\.std"):
        ta.grad(lambda x: np.std([x[0], x[1]]))(X)


@pytest.mark.parametrize("f, exc, msg", [
    (lambda x: np.fabs(x * 1j), TypeError, "not defined for complex"),
    (lambda x: np.rot90(x.reshape(1, 3), axes=(0, 0)), ValueError, "axes must be different"),
    (lambda x: np.rot90(x.reshape(1, 3), axes=(0,)), ValueError, "len\\(axes\\) must be 2"),
    (lambda x: np.rollaxis(x, 3), np.exceptions.AxisError, "out of bounds"),
    (lambda x: np.dsplit(x, 3), ValueError, "3 or more dimensions"),
    (lambda x: np.select([x.value > 0], [x, x]), ValueError, "same length"),
    (lambda x: np.select([np.ones(3)], [x]), TypeError, "should be boolean"),
    (lambda x: np.partition(x, 1, order="a"), TypeError, "drop order="),
    (lambda x: np.linalg.matrix_power(x, 2), np.linalg.LinAlgError, "square"),
    (lambda x: np.linalg.matrix_power(x.reshape(3, 1) * x, 1.5), TypeError, "integer"),
    (lambda x: np.linalg.multi_dot([x]), ValueError, "at least two"),
    (lambda x: np.linalg.multi_dot([x, np.ones((3, 2, 2)), x]), np.linalg.LinAlgError,
     "must be 2-d"),
    (lambda x: np.linalg.norm(x.reshape(3, 1) * x, 3), ValueError, "invalid norm order"),
    (lambda x: tnp.r_["r", x], ValueError, "integer axis directive"),
    (lambda x: tnp.c_[x, 1.0], ValueError, "scalar entries"),
])
def test_errors(f, exc, msg):
    with pytest.raises(exc, match=msg):
        ta.grad(lambda x: np.sum(np.real(f(x))))(X)


def test_partition_and_nan_to_num_guards_on_replay():
    from tapead.errors import GuardFlippedError
    w = np.arange(3.0)
    rec = ta.record(lambda x: tnp.sum(np.partition(x, 1) * w), np.array([3.0, 1.0, 2.0]))
    value, g = rec.value_and_grad(np.array([3.5, 1.5, 2.5]))      # same arrangement
    assert value == pytest.approx(2.5 * 1 + 3.5 * 2)
    with pytest.raises(GuardFlippedError, match="partition"):
        rec.value_and_grad(np.array([1.0, 3.0, 2.0]))
    rec = ta.record(lambda x: tnp.sum(np.nan_to_num(np.log(x))), np.array([1.5, 2.0]))
    with pytest.raises(GuardFlippedError, match="nan_to_num"), np.errstate(divide="ignore"):
        rec.value_and_grad(np.array([0.0, 2.0]))                  # log(0) = -inf
