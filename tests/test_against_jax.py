"""tapead's derivatives against JAX's (float64), over the op-spec table.

Every row of ``opspecs.SPECS`` (every input kind) at seeded random points:
``ta.grad`` of the summed output equals ``jax.grad`` of the ``jax.numpy``
version to 1e-12 relative.  A few composite functions also compare
``jacfwd``, ``jacrev``, ``hessian`` and ``hvp``.
"""
import zlib

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp

from opspecs import F64, NO_JAX, SPECS, case_id, cases, ns

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

JNP = ns(jnp, sigmoid=jax.nn.sigmoid, relu=jax.nn.relu)
RTOL = 1e-12


def _rel_err(a, b):
    """max |a - b| / max |b| (norm-wise: sums may cancel elementwise)."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    scale = float(np.max(np.abs(b), initial=0.0))
    err = float(np.max(np.abs(a - b), initial=0.0))
    return err if scale == 0.0 else err / scale


def _assert_tree_close(a, b, what):
    if isinstance(b, (tuple, list)):
        assert isinstance(a, (tuple, list)) and len(a) == len(b), what
        for x, y in zip(a, b):
            _assert_tree_close(x, y, what)
        return
    err = _rel_err(a, b)
    assert err <= RTOL, f"{what}: relative difference {err:.2e} > {RTOL:g}"


def _seed(*parts):
    return zlib.crc32("/".join(map(str, parts)).encode())


CASES = cases([s for s in SPECS if s.name not in NO_JAX], dtypes=(F64,))
N_POINTS = 3


@pytest.fixture(scope="module")
def jax_reference():
    """case id -> (points, jax values, jax gradients) for every case.

    JAX's side runs as ONE jitted function over all the cases (each case
    vmapped over its points): eager JAX compiles every operation for every
    shape, which costs minutes on a small machine; one compilation costs
    seconds.
    """
    funcs, batches, points = [], [], []
    for case in CASES:
        spec, _, shapes, _ = case
        rng = np.random.default_rng(_seed("jax", case_id(case)))
        pts = [spec.sample(rng, shapes) for _ in range(N_POINTS)]
        nums = tuple(range(spec.arity))
        body = (lambda spec: lambda *a: spec.body(JNP, *a))(spec)
        grad = jax.grad(lambda *a, body=body: jnp.sum(body(*a)), argnums=nums)
        funcs.append(jax.vmap(lambda *a, body=body, grad=grad: (body(*a), grad(*a))))
        batches.append(tuple(np.stack([np.asarray(p[i]) for p in pts])
                             for i in range(spec.arity)))
        points.append(pts)
    results = jax.jit(lambda bs: [f(*b) for f, b in zip(funcs, bs)])(batches)
    out = {}
    for case, pts, (vals, grads) in zip(CASES, points, results):
        out[case_id(case)] = (pts, np.asarray(vals), [np.asarray(g) for g in grads])
    return out


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_grad_matches_jax(case, jax_reference):
    spec, kind, shapes, _ = case
    pts, vals, grads = jax_reference[case_id(case)]
    nums = tuple(range(spec.arity))
    ta_grad = ta.grad(lambda *a: tnp.sum(spec.fn(*a)), argnums=nums)
    for j, args in enumerate(pts):
        assert _rel_err(spec.fn(*args), vals[j]) <= RTOL, f"{spec.name}: values"
        _assert_tree_close(ta_grad(*args), tuple(g[j] for g in grads),
                           f"{spec.name} at {args}")


# ---------------------------------------------------------------------------
# composites: Jacobians, Hessians, Hessian-vector products
# ---------------------------------------------------------------------------

W = np.random.default_rng(7).standard_normal((3, 4))


def _mlp(m, x):                 # scalar output of a 4-vector
    h = m.tanh(m.matmul(W, x) + 0.1)
    return m.sum(m.sigmoid(h) ** 2) + m.log1p(m.dot(x, x))


def _softmax(m, x):             # vector output
    e = m.exp(x - 1.0)
    return e / m.sum(e)


def _mixed(m, x, y):            # vector output of two arguments
    z = m.concatenate([x[1:] * y[:2], m.sin(y)])
    return m.where(np.array([True, False, True, True, False]), m.sqrt(z * z + 1.0), z[::-1])


def _indexing(m, x):            # repeated gathers, reductions, transpose
    a = m.reshape(x, (2, 3))
    b = m.transpose(a)[np.array([0, 2, 2])]
    return m.sum(m.outer(b[:, 0], b[:, 1]) * m.mean(a, axis=0), axis=1)


def _floats(m, x, y):           # Python floats: the C fast path
    return (1.0 - x) ** 2 + 10.0 * (y - x ** 2) ** 2 + m.arctan2(x, y) * m.hypot(x, y)


COMPOSITES = [
    ("mlp", _mlp, ((4,),), 0),
    ("softmax", _softmax, ((5,),), 0),
    ("mixed", _mixed, ((3,), (3,)), (0, 1)),
    ("indexing", _indexing, ((6,),), 0),
    ("floats", _floats, ((), ()), (0, 1)),
]


def _point(shapes, rng):
    return tuple(float(rng.uniform(0.3, 1.5)) if s == () else rng.uniform(0.3, 1.5, s)
                 for s in shapes)


@pytest.mark.parametrize("name, body, shapes, argnums", COMPOSITES,
                         ids=[c[0] for c in COMPOSITES])
def test_jacobians_match_jax(name, body, shapes, argnums):
    rng = np.random.default_rng(_seed("jac", name))
    args = _point(shapes, rng)
    f_t = lambda *a: body(tnp, *a)       # noqa: E731
    f_j = lambda *a: body(JNP, *a)       # noqa: E731
    value, jf, jr = jax.jit(lambda *a: (f_j(*a), jax.jacfwd(f_j, argnums)(*a),
                                        jax.jacrev(f_j, argnums)(*a)))(*args)
    assert _rel_err(f_t(*args), value) <= RTOL
    _assert_tree_close(ta.jacfwd(f_t, argnums)(*args), jf, f"{name}: jacfwd")
    _assert_tree_close(ta.jacrev(f_t, argnums)(*args), jr, f"{name}: jacrev")


SCALAR_COMPOSITES = [
    ("mlp", _mlp, ((4,),)),
    ("sum_softmax_sq", lambda m, x: m.sum(_softmax(m, x) ** 2), ((5,),)),
    ("sum_indexing", lambda m, x: m.sum(m.sin(_indexing(m, x))), ((6,),)),
    ("floats", _floats, ((), ())),
]


@pytest.mark.parametrize("name, body, shapes", SCALAR_COMPOSITES,
                         ids=[c[0] for c in SCALAR_COMPOSITES])
def test_hessian_and_hvp_match_jax(name, body, shapes):
    rng = np.random.default_rng(_seed("hess", name))
    args = _point(shapes, rng)
    f_t = lambda *a: body(tnp, *a)       # noqa: E731
    f_j = lambda *a: body(JNP, *a)       # noqa: E731
    tangents = _point(shapes, rng)
    nums = tuple(range(len(args)))
    hessians, want = jax.jit(lambda a, t: (
        [jax.hessian(f_j, k)(*a) for k in nums],
        jax.jvp(jax.grad(f_j, argnums=nums), a, t)[1]))(args, tangents)
    for k in nums:
        _assert_tree_close(ta.hessian(f_t, k)(*args), hessians[k],
                           f"{name}: hessian wrt argument {k}")
    got = ta.hvp(f_t, args, tangents)
    _assert_tree_close(got if len(args) > 1 else (got,), want, f"{name}: hvp")
