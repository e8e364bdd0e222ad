"""Optimizer steps: ``sgd_inplace`` gives the bits of numpy's ``p -= lr * g``
(its C pass and its numpy fallback), and refuses what it cannot update."""
import numpy as np
import pytest

import tapead as ta
from tapead import _core
from tapead.optim import sgd, sgd_inplace


def _reference(p, g, lr):
    q = p.copy()
    q -= lr * g
    return q


def _same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(64, 64), (7,), (), (0,), (3, 0, 2), (1000, 3)])
@pytest.mark.parametrize("lr", [0.1, 1e-3, 3, np.float64(0.1)])
def test_c_pass_matches_numpy_bits(dtype, shape, lr):
    rng = np.random.default_rng(0)
    p = rng.standard_normal(shape).astype(dtype)
    g = (rng.standard_normal(shape) * 1e3).astype(dtype)
    ref = _reference(p, g, lr)
    params = {"w": p}
    sgd_inplace(params, {"w": g}, lr)
    assert params["w"] is p                 # in place
    assert _same_bits(p, ref)


def test_float32_with_a_float64_rate_computes_as_numpy_does():
    # a numpy float64 rate makes numpy multiply in float64, then cast: not the C pass
    rng = np.random.default_rng(1)
    p = rng.standard_normal(1000).astype(np.float32)
    g = rng.standard_normal(1000).astype(np.float32)
    lr = np.float64(0.1)
    ref = _reference(p, g, lr)
    sgd_inplace([p], [g], lr)
    assert _same_bits(p, ref)


def test_non_contiguous_and_mixed_dtype_leaves_take_numpy():
    rng = np.random.default_rng(2)
    big = rng.standard_normal((8, 6))
    p = big[:, ::2]                         # a strided view, updated in place
    g = rng.standard_normal((8, 3))
    q = rng.standard_normal(5).astype(np.float32)
    gq = rng.standard_normal(5)             # float64 gradient of a float32 parameter
    refs = [_reference(p, g, 0.5), _reference(q, gq, 0.5)]
    sgd_inplace((p, q), (g, gq), 0.5)
    assert _same_bits(p, refs[0]) and _same_bits(q, refs[1])
    assert _same_bits(big[:, ::2], refs[0])


def test_ndarray_subclass_parameters_are_updated_in_place_by_numpy():
    class Sub(np.ndarray):
        pass
    rng = np.random.default_rng(6)
    base = rng.standard_normal(6)
    p = base.copy().view(Sub)
    g = rng.standard_normal(6)
    ref = _reference(base, g, 0.3)
    sgd_inplace({"w": p}, {"w": g}, 0.3)
    assert type(p) is Sub and np.asarray(p).tobytes() == ref.tobytes()


def test_gradient_that_is_the_parameter_or_overlaps_it():
    rng = np.random.default_rng(3)
    p = rng.standard_normal(10)
    ref = _reference(p, p, 0.25)
    sgd_inplace([p], [p], 0.25)             # the same buffer: elementwise, fine in C
    assert _same_bits(p, ref)
    buf = rng.standard_normal(11)
    p, g = buf[1:], buf[:-1]                # partly overlapping: numpy's overlap handling
    ref = _reference(p, g.copy(), 0.25)
    sgd_inplace([p], [g], 0.25)
    assert _same_bits(p, ref)


def test_nested_pytree_and_agreement_with_sgd():
    rng = np.random.default_rng(4)
    params = {"layer": [rng.standard_normal((3, 2)), rng.standard_normal(2)],
              "scale": rng.standard_normal(())}
    grads = ta.tree_util.tree_map(lambda x: rng.standard_normal(np.shape(x)), params)
    expected = sgd(params, grads, 0.1)
    sgd_inplace(params, grads, 0.1)
    for a, b in zip(ta.tree_util.tree_flatten(params)[0],
                    ta.tree_util.tree_flatten(expected)[0]):
        assert _same_bits(np.asarray(a), np.asarray(b))


def test_training_steps_match_the_numpy_loop_bit_for_bit():
    from tapead.nn import init_mlp, mlp, mse
    rng = np.random.default_rng(5)
    x, t = rng.standard_normal((16, 2)), rng.standard_normal((16, 1))
    p1 = init_mlp([2, 8, 1], np.random.default_rng(0))
    p2 = {k: v.copy() for k, v in p1.items()}
    vg = ta.value_and_grad(lambda p: mse(mlp(p, x), t))
    for _ in range(5):
        _, g = vg(p1)
        for k in p1:
            p1[k] -= 0.1 * g[k]
        _, g = vg(p2)
        sgd_inplace(p2, g, 0.1)
    assert all(_same_bits(p1[k], p2[k]) for k in p1)


def test_refusals_change_nothing():
    p = {"w": np.ones(3), "b": np.ones(2)}
    with pytest.raises(ValueError, match="shape"):
        sgd_inplace(p, {"w": np.ones(3), "b": np.ones(3)}, 0.1)
    with pytest.raises(ValueError, match="structure"):
        sgd_inplace(p, {"w": np.ones(3), "c": np.ones(2)}, 0.1)
    with pytest.raises(ValueError, match="structure"):
        sgd_inplace(p, {"w": np.ones(3)}, 0.1)
    with pytest.raises(ValueError, match="gradient"):
        sgd_inplace(p, {"w": np.ones(3), "b": 2.0}, 0.1)
    assert all((v == 1.0).all() for v in p.values())
    ro = np.ones(2)
    ro.flags.writeable = False
    w = np.ones(3)
    with pytest.raises(ValueError, match="read-only"):
        sgd_inplace([w, ro], [np.ones(3), np.ones(2)], 0.1)
    assert (w == 1.0).all()
    with pytest.raises(TypeError, match="ta.optim.sgd"):
        sgd_inplace({"w": 1.0}, {"w": 2.0}, 0.1)
    with pytest.raises(ValueError, match="2 parameters but 1"):
        _core.sgd_step([np.ones(1), np.ones(1)], [np.ones(1)], 0.1)
