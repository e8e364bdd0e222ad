"""Native loop bodies (``tapead.compiler.bodies``): a scan's scalar body as
straight-line C, its steps as C loops forward, reversed and checkpointed.

Every opcode's compiled value and partials give the interpreter's bits
(forward values, ys, cotangents of the carries and of every step's inputs,
and the revolve reverse), on values inside each op's domain and on special
values; under ``ta.jit`` a scan's forward and reverse loops are one node
each, compiled after the first replays, and give the eager bits -- with
checkpoints, reversed, with several outputs, with closures, per lane under
vmap and inside an HVP."""
import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead import _core
from tapead._prims import elementwise
from tapead.compiler import bodies, eager, native
from tapead.errors import NativeCompileError
from tapead.scalar_scan import scan_scalar_vjp_p

needs_cc = pytest.mark.skipif(not native.available(), reason="no C compiler here")


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TAPEAD_CACHE_DIR", str(tmp_path / "cache"))


# op -> (the step's result from its carries a, b and input u, args in domain)
BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "pow": lambda a, b: a ** b,
    "maximum": tnp.maximum, "minimum": tnp.minimum, "arctan2": tnp.arctan2,
    "hypot": tnp.hypot,
}
CONST = {
    "addc": lambda a: a + 1.5, "subc": lambda a: a - 1.5, "rsubc": lambda a: 1.5 - a,
    "mulc": lambda a: a * 1.5, "divc": lambda a: a / 1.5, "rdivc": lambda a: 1.5 / a,
    "rpowc": lambda a: 1.5 ** a,
}
POWERS = (2.0, 3.0, 4.0, -1.0, 0.5, 1.5, 0.0, -2.5)
UNARY = ["negative", "abs", "sin", "cos", "tan", "exp", "log", "log1p", "expm1", "sqrt", "tanh",
         "arctan", "arcsin", "arccos", "sinh", "cosh", "square", "reciprocal", "exp2",
         "log2", "log10", "arcsinh", "arctanh", "cbrt", "sign", "positive"]
SHIFTED = {"arccosh": 1.25}          # argument shifted into the domain


def _unary(name):
    if name in ("sigmoid", "relu"):
        return getattr(elementwise, name)
    return getattr(tnp, name)


def _loop(result, T=48):
    """A ScalarLoop whose body is ``r = result(a, b, u)``, carries
    ``(a + 1e-3 r, 0.999 b + 1e-3 u)`` and outputs ``(r, a * u)``."""
    body = _core.Tape()
    a, b, u = body.input_many([np.float64(0.4), np.float64(0.6), np.float64(0.5)])
    try:
        r = result(a, b, u)
        c0 = a + 1e-3 * r
        c1 = 0.999 * b + 1e-3 * u
        y1 = a * u
    finally:
        body.active = False
    mk = lambda: _core.ScalarLoop(body, body.inputs[:2], body.inputs[2:], [c0.idx, c1.idx],  # noqa: E731
                                  [r.idx, y1.idx])
    return body, mk(), mk()


def _xs(T, lo, hi, specials=()):
    rng = np.random.default_rng(T)
    xs = rng.uniform(lo, hi, T)
    xs[:len(specials)] = specials
    return np.ascontiguousarray(xs.reshape(-1, 1))


def _same(x, y):
    x, y = np.asarray(x), np.asarray(y)
    assert x.shape == y.shape
    assert np.array_equal(x, y, equal_nan=True), np.max(np.abs(x - y))


def _check(result, lo=0.1, hi=0.9, specials=(), carry=(0.4, 0.6)):
    body, interp, comp = _loop(result)
    assert bodies.lowerable(comp), bodies._Body(comp.body_spec()).missing()
    assert bodies.compile_loops([comp]) is not None and comp.native is not None
    xs = _xs(48, lo, hi, specials)
    c0 = np.array(carry)
    rng = np.random.default_rng(1)
    gc, gy = rng.normal(size=2), rng.normal(size=(48, 2))
    with np.errstate(all="ignore"):
        outs = [lp.forward(c0, xs) for lp in (interp, comp)]
        for p, q in zip(*outs):
            _same(p, q)
        rev = [lp.reverse(gc, gy) for lp in (interp, comp)]
        for p, q in zip(*rev):
            _same(p, q)
        ck = [lp.reverse_checkpointed(c0, xs, gc, gy, 3) for lp in (interp, comp)]
        for p, q in zip(*ck):
            _same(p, q)
        for p, q in zip(rev[0], ck[1][:2]):
            _same(p, q)
        vals = [lp.forward(c0, xs, keep=False) for lp in (interp, comp)]
        for p, q in zip(*vals):
            _same(p, q)
    # the opcode under test is on the body's tape
    return body


@needs_cc
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_ops_give_the_interpreters_bits(name):
    f = BINARY[name]
    body = _check(lambda a, b, u: f(u * a + 0.2, b))
    assert _core.OPCODES[name] in body.export_nodes()[0]
    # both operands the same node, and ties
    _check(lambda a, b, u: f(u, u) + f(u, 0.5 + 0 * a), specials=[0.5, 0.5, 0.25])


@needs_cc
@pytest.mark.parametrize("name", sorted(CONST))
def test_constant_ops_give_the_interpreters_bits(name):
    body = _check(lambda a, b, u: CONST[name](u + a * b))
    assert _core.CONST_OPCODES[name] in body.export_nodes()[0]


@needs_cc
@pytest.mark.parametrize("c", POWERS)
def test_constant_powers_give_the_interpreters_bits(c):
    body = _check(lambda a, b, u: (u + a * b) ** c)
    ops = set(body.export_nodes()[0].tolist())
    assert ops & {_core.CONST_OPCODES["powc"], _core.OPCODES["square"],
                  _core.OPCODES["reciprocal"], _core.OPCODES["sqrt"]}
    _check(lambda a, b, u: u ** c, lo=-1.0, hi=1.0, specials=[0.0, -0.0, 1.0, -1.0])


@needs_cc
@pytest.mark.parametrize("name", UNARY + ["sigmoid", "relu"] + sorted(SHIFTED))
def test_unary_ops_give_the_interpreters_bits(name):
    f = _unary(name)
    shift = SHIFTED.get(name, 0.0)
    body = _check(lambda a, b, u: f(shift + 0.5 * u * a + 0.1 * b))
    code = _core.OPCODES.get({"negative": "neg", "positive": "pos"}.get(name, name))
    assert code in body.export_nodes()[0]
    # special arguments: zeros, ones, out of the domain (nan), large
    _check(lambda a, b, u: f(u), lo=-3.0, hi=3.0,
           specials=[0.0, -0.0, 1.0, -1.0, 40.0, -40.0, 1e-310])


def test_a_body_without_lowering_keeps_the_interpreter():
    body, interp, comp = _loop(lambda a, b, u: tnp.logaddexp(a, u))
    assert not bodies.lowerable(comp)
    with pytest.raises(ValueError, match="no lowering"):
        bodies.lower_body(comp)
    assert bodies.compile_loops([comp]) is None and comp.native is None


def test_set_native_checks_its_addresses():
    _, loop, _ = _loop(lambda a, b, u: a * u)
    with pytest.raises(ValueError, match="five function addresses"):
        loop.set_native(object(), 1, 0, 0, 0, 0)


@needs_cc
def test_switching_code_between_runs_drops_what_the_forward_kept():
    _, _, comp = _loop(lambda a, b, u: tnp.sin(a) * u)
    bodies.compile_loops([comp])
    xs = _xs(48, 0.1, 0.9)
    comp.forward(np.array([0.4, 0.6]), xs)
    comp.set_native(None, 0, 0, 0, 0, 0)
    with pytest.raises(RuntimeError, match="call forward first"):
        comp.reverse(np.ones(2), np.ones((48, 2)))
    comp.forward(np.array([0.4, 0.6]), xs)       # interpreted again: fine
    comp.reverse(np.ones(2), np.ones((48, 2)))


# -- under ta.jit --------------------------------------------------------------

DT = 0.01


def _rollout(checkpoints=None, reverse=False):
    def step(c, u):
        p, v = c
        v2 = v + DT * tnp.sin(u) * p - 0.1 * v
        return (p + DT * v2, v2), (u * u, p * v2)

    def loss(us, w):
        kw = {} if checkpoints is None else {"checkpoints": checkpoints}
        (p, v), (c1, c2) = ta.scan(step, (w, 0.0), us, reverse=reverse, **kw)
        return (p - 1.0) ** 2 + v ** 2 + 1e-3 * tnp.sum(c1) + tnp.sum(c2 * us)
    return loss


def _eq_tree(a, b):
    for x, y in zip(ta.tree_flatten(a)[0], ta.tree_flatten(b)[0]):
        _same(x, y)


def _scan_nodes(jf, *args):
    tape = jf._recording(args, {}).program.tape
    return tape.n_nodes


@needs_cc
@pytest.mark.parametrize("checkpoints", [None, 7])
@pytest.mark.parametrize("reverse", [False, True])
def test_jit_of_a_scans_gradient_is_two_compiled_loops(checkpoints, reverse):
    g = ta.value_and_grad(_rollout(checkpoints, reverse), argnums=(0, 1))
    jg = ta.jit(g)
    us = np.sin(np.linspace(0.0, 3.0, 500))
    _eq_tree(jg(us, 0.3), g(us, 0.3))
    assert _scan_nodes(jg, us, 0.3) < 60        # not 500 recorded steps
    comp = jg.compile(us, 0.3)
    assert comp.loops and all(lp.native is not None for lp in comp.loops)
    assert "with native bodies" in comp.describe()
    for k in range(3):                          # new inputs: the compiled loops
        _eq_tree(jg(us + 0.1 * k, 0.3 - 0.05 * k), g(us + 0.1 * k, 0.3 - 0.05 * k))
    assert "tapead_body_0_rev" in jg.lower(us, 0.3)
    assert jg.cache_info().compiled == 1


@needs_cc
def test_jit_scan_gradient_matches_finite_differences():
    f = _rollout(5)
    jg = ta.jit(ta.grad(f, argnums=1))
    us = np.cos(np.linspace(0.0, 2.0, 200))
    jg.compile(us, 0.3)
    eps = 1e-6
    fd = (f(us, 0.3 + eps) - f(us, 0.3 - eps)) / (2 * eps)
    assert abs(jg(us, 0.3) - fd) < 1e-7 * max(1.0, abs(fd))


@needs_cc
def test_a_closure_in_the_body_is_not_frozen_by_the_recording():
    def loss(us, w):
        return ta.scan(lambda c, u: (c + w * tnp.sin(u * c), c * u), 0.5, us)[0]
    g = ta.grad(loss, argnums=(0, 1))
    jg = ta.jit(g)
    us = np.linspace(0.1, 1.0, 50)
    for w in (0.3, 0.7, -1.2):
        _eq_tree(jg(us, w), g(us, w))
    jg.compile(us, 0.3)
    _eq_tree(jg(us, 2.0), g(us, 2.0))
    # a closure over a value jit traces but grad does not differentiate
    gu = ta.grad(loss)
    jgu = ta.jit(gu)
    for w in (0.3, 0.7, -1.2, 0.3):
        _eq_tree(jgu(us, w), gu(us, w))


@needs_cc
def test_jit_of_vmap_of_a_scans_gradient_runs_each_lane():
    g = ta.vmap(ta.grad(_rollout(), argnums=1), in_axes=(0, None))
    jg = ta.jit(g)
    U = np.sin(np.arange(4 * 60).reshape(4, 60) / 7.0)
    _eq_tree(jg(U, 0.3), g(U, 0.3))
    jg.compile(U, 0.3)
    _eq_tree(jg(U + 0.2, 0.4), g(U + 0.2, 0.4))
    one = [ta.grad(_rollout(), argnums=1)(U[i] + 0.2, 0.4) for i in range(4)]
    _same(jg(U + 0.2, 0.4), np.array(one))


@needs_cc
def test_jit_of_an_hvp_through_a_scan():
    f = lambda us: _rollout(3)(us, 0.3)              # noqa: E731
    h = lambda x, v: ta.hvp(f, (x,), (v,))           # noqa: E731
    jh = ta.jit(h)
    us, v = np.sin(np.linspace(0, 2, 40)), np.cos(np.linspace(0, 5, 40))
    _same(jh(us, v), h(us, v))
    jh.compile(us, v)
    _same(jh(us + 0.1, v), h(us + 0.1, v))
    eps = 1e-5
    fd = (ta.grad(f)(us + eps * v) - ta.grad(f)(us - eps * v)) / (2 * eps)
    np.testing.assert_allclose(jh(us, v), fd, rtol=1e-7, atol=1e-8)


def _vjp_node(jg, *args):
    """The recorded reverse loop's node: (its primitive's params, its inputs)."""
    tape = jg._recording(args, {}).program.tape
    op = tape.export_nodes()[0]
    for i in np.flatnonzero(op == 1):
        rec = tape.record(int(i))
        if rec.prim is scan_scalar_vjp_p:
            vals = [tape.value(p) if p >= 0 else c for p, c in zip(rec.parents, rec.consts)]
            return rec.params, vals
    raise AssertionError("no scan_scalar_vjp node")


@pytest.mark.parametrize("checkpoints", [None, 4])
def test_the_reverse_loop_node_has_derivatives_of_its_own(checkpoints):
    """The node a recording keeps for a scan's reverse loop is itself
    differentiable (forward and reverse), against finite differences."""
    jg = ta.jit(ta.grad(_rollout(checkpoints), argnums=(0, 1)))
    us = np.sin(np.linspace(0.0, 2.0, 30))
    params, vals = _vjp_node(jg, us, 0.3)
    vals = [np.asarray(v, dtype=np.float64) for v in vals]

    def node(*args):
        return _core.bind(scan_scalar_vjp_p, *args, **params)
    rng = np.random.default_rng(3)
    tangents = [rng.normal(size=np.shape(v)) for v in vals]
    _, jv = ta.jvp(node, tuple(vals), tuple(tangents))
    eps = 1e-6
    plus = node(*[v + eps * t for v, t in zip(vals, tangents)])
    minus = node(*[v - eps * t for v, t in zip(vals, tangents)])
    np.testing.assert_allclose(jv, (plus - minus) / (2 * eps), rtol=1e-6, atol=1e-8)
    w = rng.normal(size=np.shape(jv))
    _, pull = ta.vjp(node, *vals)
    cts = pull(w)
    lhs = sum(float(np.sum(c * t)) for c, t in zip(cts, tangents))
    assert abs(lhs - float(np.sum(w * jv))) < 1e-9 * max(1.0, abs(lhs))


@needs_cc
def test_strict_names_loops_left_on_the_interpreter():
    def loss(us):
        return ta.scan(lambda c, u: (tnp.logaddexp(c, u) * 0.5, None), 0.1, us)[0]
    jg = ta.jit(ta.grad(loss), strict=True)
    us = np.linspace(0.0, 1.0, 20)
    _same(jg(us), ta.grad(loss)(us))
    with pytest.raises(NativeCompileError, match="loop bodies"):
        jg.compile(us)
    _same(jg(us + 0.5), ta.grad(loss)(us + 0.5))


def test_without_native_code_the_scans_run_interpreted(monkeypatch):
    monkeypatch.setenv("TAPEAD_NATIVE", "0")
    g = ta.grad(_rollout(4), argnums=1)
    jg = ta.jit(g)
    us = np.linspace(0.0, 1.0, 80)
    jg(us, 0.3)
    comp = jg.compile(us, 0.3)
    assert comp is None or all(lp.native is None for lp in comp.loops)
    _same(jg(us, 0.5), g(us, 0.5))


def _join_compiles():
    import threading
    for t in threading.enumerate():
        if t.name in ("tapead-compile-loop", "tapead-find-native"):
            t.join(60)


@needs_cc
def test_eager_scans_run_compiled_once_their_body_is_compiled(monkeypatch):
    eager._eager_on()                 # looks for a compiler in the background
    _join_compiles()
    ran = []
    orig = eager.for_eager
    monkeypatch.setattr(eager, "for_eager", lambda loop, T: ran.append(orig(loop, T)) or ran[-1])

    def loss(us, w):                   # a body of its own: no other test compiled it
        step = lambda c, u: (c * 0.999 + w * tnp.cos(u * 1.2345), c * u)  # noqa: E731
        c, ys = ta.scan(step, 0.25, us, checkpoints=6)
        return c + tnp.sum(ys)
    g = ta.value_and_grad(loss, argnums=(0, 1))
    us = np.sin(np.linspace(0.0, 4.0, 3000))
    first = [g(us, 0.5) for _ in range(eager.EAGER_AFTER)]
    _join_compiles()
    later = g(us, 0.5)
    assert ran[:eager.EAGER_AFTER] == [False] * eager.EAGER_AFTER and ran[-1] is True
    _eq_tree(later, first[0])
    compiled_at = g(us + 0.1, -0.3)
    assert ran[-1] is True
    monkeypatch.setenv("TAPEAD_NATIVE", "0")
    _eq_tree(g(us + 0.1, -0.3), compiled_at)
    assert ran[-1] is False           # switched off: interpreted, the same bits


def test_short_eager_scans_stay_interpreted():
    body, loop, _ = _loop(lambda a, b, u: a * u)
    assert eager.for_eager(loop, 10) is False and loop.native is None


# -- small-vector carries and fori_loop ------------------------------------------

H = 0.01


def _rk4(fori_loop, steps=200):
    def f(y):
        return tnp.stack([y[1], -0.1 * y[1] - tnp.sin(y[0])])

    def step(_, y):
        k1 = f(y)
        k2 = f(y + H / 2 * k1)
        k3 = f(y + H / 2 * k2)
        k4 = f(y + H * k3)
        return y + H / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return lambda y0: fori_loop(0, steps, step, y0)[0] ** 2


def test_a_fori_loop_over_a_small_vector_is_one_loop_node():
    g = ta.value_and_grad(_rk4(ta.fori_loop))
    y0 = np.array([0.3, -0.5])
    tape_nodes = []

    def spy(y):
        out = _rk4(ta.fori_loop)(y)
        tape_nodes.append(out.tape.n_nodes)
        return out
    ta.grad(spy)(y0)
    assert tape_nodes[0] < 30                     # not 200 steps of ~60 nodes
    v, gy = g(y0)
    plain = _rk4(lambda lo, hi, body, init: _python_fori(lo, hi, body, init))
    v2, gy2 = ta.value_and_grad(plain)(y0)
    assert v == v2
    np.testing.assert_allclose(gy, gy2, rtol=1e-14, atol=1e-16)
    eps = 1e-6
    fd = [(_rk4(ta.fori_loop)(y0 + eps * e) - _rk4(ta.fori_loop)(y0 - eps * e)) / (2 * eps)
          for e in np.eye(2)]
    np.testing.assert_allclose(gy, fd, rtol=1e-7)


def _python_fori(lo, hi, body, val):
    for i in range(lo, hi):
        val = body(i, val)
    return val


@needs_cc
@pytest.mark.parametrize("checkpoints", [None, 6])
def test_jit_of_a_small_vector_fori_loop_compiles_it(checkpoints):
    def loss(y0):
        step = lambda _, y: y + H * tnp.stack([y[1], -tnp.sin(y[0]) * y[2], 0.1 * y[0]])  # noqa: E731
        return tnp.sum(ta.fori_loop(0, 300, step, y0, checkpoints=checkpoints) ** 2)
    g = ta.value_and_grad(loss)
    jg = ta.jit(g)
    y0 = np.array([0.3, -0.5, 1.1])
    _eq_tree(jg(y0), g(y0))
    comp = jg.compile(y0)
    assert comp.loops and all(lp.native is not None for lp in comp.loops)
    for k in range(3):
        _eq_tree(jg(y0 + 0.1 * k), g(y0 + 0.1 * k))


def test_a_fori_body_that_reads_its_index_runs_step_by_step():
    body = lambda i, x: x * 0.5 + (1.0 if i % 2 else 0.0) * tnp.sin(x)   # noqa: E731
    f = lambda x: ta.fori_loop(0, 9, body, x)                          # noqa: E731
    want = 0.7
    for i in range(9):
        want = body(i, want)
    assert f(0.7) == want
    eps = 1e-6
    assert abs(ta.grad(f)(0.7) - (f(0.7 + eps) - f(0.7 - eps)) / (2 * eps)) < 1e-8


def test_which_fori_bodies_ignore_their_index():
    from tapead.loops import _ignores_index
    assert _ignores_index(lambda i, x: x * 2)
    assert not _ignores_index(lambda i, x: x * i)
    assert not _ignores_index(lambda i, x: (lambda: i)() + x)          # closed over
    assert not _ignores_index(lambda *a: a[1])
    assert not _ignores_index(lambda i, x: locals()["i"] + x)

    class Body:
        def __call__(self, i, x):
            return x
    assert not _ignores_index(Body())


def test_a_scan_over_a_small_vector_carry_with_xs():
    def loss(us, y0):
        step = lambda y, u: (y * 0.99 + u * tnp.stack([tnp.cos(y[1]), y[0]]), y[0] * u)  # noqa: E731
        y, ys = ta.scan(step, y0, us)
        return tnp.sum(y ** 2) + tnp.sum(ys)
    us, y0 = np.linspace(0.0, 1.0, 40), np.array([0.2, 0.4])
    g = ta.grad(loss, argnums=(0, 1))
    gu, gy = g(us, y0)
    eps = 1e-6
    fd = [(loss(us, y0 + eps * e) - loss(us, y0 - eps * e)) / (2 * eps) for e in np.eye(2)]
    np.testing.assert_allclose(gy, fd, rtol=1e-7)
    k = 7
    e = np.zeros(40)
    e[k] = eps
    assert abs(gu[k] - (loss(us + e, y0) - loss(us - e, y0)) / (2 * eps)) < 1e-7 * abs(gu[k])
    jg = ta.jit(g)
    _eq_tree(jg(us, y0), (gu, gy))
    _eq_tree(jg(us + 0.3, y0), g(us + 0.3, y0))


@pytest.mark.parametrize("compiled", [False, True])
def test_an_input_changed_in_place_between_calls_is_not_stale(compiled):
    """The reverse loop reverses the forward run of the same replay, even
    when the loop's value is not an output and the caller refills the same
    array between calls."""
    def loss(us):
        return ta.scan(lambda c, u: (c * 0.9 + tnp.sin(u) * c, None), 0.5, us)[0]
    g = ta.grad(loss)
    jg = ta.jit(g)
    us = np.linspace(0.0, 1.0, 300)
    jg(us), jg(us)
    if compiled:
        jg.compile(us)
    for k in range(3):
        us[:] = np.sin(np.arange(300) * (k + 1.0))
        _same(jg(us), g(us.copy()))
