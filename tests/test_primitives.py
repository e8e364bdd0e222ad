"""One parameterised gradient check over every primitive (the op-spec table).

For every row of ``opspecs.SPECS``, every input kind and every dtype:

* the value equals numpy's;
* ``ta.check_grads`` passes to order 2 in both modes;
* the full Jacobian built column by column with ``ta.jvp`` equals the one
  built row by row with ``ta.vjp`` and the one from central differences,
  and ``ta.grad`` of the summed output equals the summed rows;
* float32 in gives float32 out (values, tangents, cotangents, gradients).

Binary rows also run with one argument a Python-float constant (the
constant opcodes of the C kernel on scalars, the generic path on arrays).
Separately: the C scalar kernel agrees with the Python rule to 1e-15, and
``check_grads`` fails on deliberately wrong rules.
"""
import zlib

import numpy as np
import pytest

import tapead as ta
import tapead.numpy as tnp
from tapead import _core
from tapead._core import OPCODES, scalar_rule
from tapead._prims.base import Primitive
from tapead.errors import NonDifferentiableError

from opspecs import ARRAY_OPS, BY_NAME, ELEMENTWISE, F32, F64, SPECS, case_id, cases

# ---------------------------------------------------------------------------
# the cases: every row x kind x dtype, plus constant-operand variants
# ---------------------------------------------------------------------------

CONST_KINDS = (("const_y", ((), ())), ("const_x", ((), ())),
               ("const_y_array", ((2, 3), ())), ("const_x_array", ((), (2, 3))))


def _all_cases():
    out = cases()
    for s in ELEMENTWISE:
        if s.arity == 2:
            for kind, shapes in CONST_KINDS:
                dts = (F64,) if "array" not in kind else (F64, F32)
                out += [(s, kind, shapes, dt) for dt in dts]
    return out


# Known bugs in tapead: the case must fail with exactly this error (strict).
LINEAR_JVP_BUG = (
    "tapead bug: Primitive.jvp of a linear primitive with several arguments "
    "(concatenate) zeroes the other arguments with np.result_type(arg); in "
    "forward-over-forward (jvp of jvp, check_grads order 2 'fwd') those arguments "
    "are outer-level Duals and np.result_type raises NonDifferentiableError")
XFAIL: dict = {}     # name -> reason; empty since the bug above was fixed


def _param(case):
    reason = XFAIL.get(case[0].name)
    marks = [pytest.mark.xfail(strict=True, raises=NonDifferentiableError,
                               reason=reason)] if reason else []
    return pytest.param(case, id=case_id(case), marks=marks)


CASES = [_param(c) for c in _all_cases()]


def _seed(*parts):
    return zlib.crc32("/".join(map(str, parts)).encode())


def _setup(case):
    """(f, np_f, args): the function under test at a sampled point."""
    spec, kind, shapes, dt = case
    rng = np.random.default_rng(_seed(case_id(case)))
    args = spec.sample(rng, shapes, dt)
    if kind.startswith("const_x"):
        c = float(args[0])                  # a Python float constant
        return (lambda y: spec.fn(c, y)), (lambda y: spec.np_fn(c, y)), args[1:]
    if kind.startswith("const_y"):
        c = float(args[1])
        return (lambda x: spec.fn(x, c)), (lambda x: spec.np_fn(x, c)), args[:1]
    return spec.fn, spec.np_fn, args


def _unit(like, k, on=True):
    """The k-th unit vector shaped and typed like ``like`` (zero if not on)."""
    if np.shape(like) == ():
        v = 1.0 if on else 0.0
        return v if isinstance(like, float) else np.result_type(like).type(v)
    t = np.zeros(np.shape(like), np.result_type(like))
    if on:
        t.flat[k] = 1
    return t


def jac_fwd(f, args):
    """Jacobian (n_out, n_in), one ``ta.jvp`` per input element."""
    cols = []
    for i, a in enumerate(args):
        for k in range(int(np.size(a))):
            tans = tuple(_unit(b, k, j == i) for j, b in enumerate(args))
            _, t = ta.jvp(f, args, tans)
            cols.append(np.ravel(np.asarray(t, np.float64)))
    return np.stack(cols, axis=1)


def jac_rev(f, args):
    """Jacobian (n_out, n_in), one ``ta.vjp`` pullback per output element."""
    out, pullback = ta.vjp(f, *args)
    rows = []
    for j in range(int(np.size(out))):
        cts = pullback(_unit(out if np.shape(out) else np.result_type(out).type(0), j))
        rows.append(np.concatenate([np.ravel(np.asarray(c, np.float64)) for c in cts]))
    return np.stack(rows, axis=0)


def jac_fd(np_f, args, h=1e-5):
    """Central differences of the numpy function, in float64."""
    x64 = [np.array(a, np.float64) for a in args]
    cols = []
    for i, a in enumerate(x64):
        for k in range(a.size):
            plus = [b.copy() for b in x64]
            minus = [b.copy() for b in x64]
            plus[i].flat[k] += h
            minus[i].flat[k] -= h
            d = (np.asarray(np_f(*plus), np.float64) - np.asarray(np_f(*minus), np.float64))
            cols.append(np.ravel(d) / (2 * h))
    return np.stack(cols, axis=1)


def _close(a, b, rtol, what):
    scale = max(1.0, float(np.max(np.abs(b), initial=0.0)))
    np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * scale, err_msg=what)


# ---------------------------------------------------------------------------
# the one parameterised gradient check
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES)
def test_primitive(case):
    spec, kind, shapes, dt = case
    f, np_f, args = _setup(case)
    tight = 1e-12 if dt == F64 else 2e-5
    loose = 1e-6 if dt == F64 else 1e-4

    # value: same as numpy, same dtype
    out = f(*args)
    ref = np_f(*args)
    assert np.shape(out) == np.shape(ref)
    _close(np.asarray(out, np.float64), np.asarray(ref, np.float64), 1e-15 if dt == F64
           else 1e-6, "value vs numpy")
    assert np.result_type(out) == dt

    # explicitly: forward vs reverse vs central differences
    jf = jac_fwd(f, args)
    jr = jac_rev(f, args)
    _close(jf, jr, tight, "jvp columns vs vjp rows")
    _close(jf, jac_fd(np_f, args), loose, "jvp vs central differences")
    nums = tuple(range(len(args)))
    g = ta.grad(lambda *a: tnp.sum(f(*a)), argnums=nums)(*args)
    _close(np.concatenate([np.ravel(np.asarray(x, np.float64)) for x in g]),
           jr.sum(axis=0), tight, "grad of the sum vs vjp rows")

    # dense Jacobians: jacfwd (K-direction forward sweep over the tape, the
    # batched JVP rules) and jacrev (one reverse sweep per output element)
    for how, jac in (("jacfwd", ta.jacfwd), ("jacrev", ta.jacrev)):
        blocks = jac(f, nums)(*args)
        for blk, a in zip(blocks, args):
            assert np.shape(blk) == np.shape(out) + np.shape(a), how
        flat = np.concatenate([np.reshape(np.asarray(b, np.float64), (jf.shape[0], -1))
                               for b in blocks], axis=1)
        _close(flat, jf, tight, f"{how} vs jvp columns")

    # dtypes: float32 in, float32 out
    _, t = ta.jvp(f, args, tuple(_unit(a, 0) for a in args))
    assert np.result_type(t) == dt, "jvp tangent dtype"
    _, pullback = ta.vjp(f, *args)
    ct = pullback(_unit(out if np.shape(out) else np.result_type(out).type(0), 0))
    for a, c, gi in zip(args, ct, g):
        assert np.result_type(c) == dt and np.shape(c) == np.shape(a), "vjp cotangent"
        assert np.result_type(gi) == dt and np.shape(gi) == np.shape(a), "grad"

    # derivatives against finite differences, both modes, to order 2 (last:
    # the known bugs fail here, after everything above has been checked)
    ta.check_grads(f, args, order=max(spec.orders), modes=("fwd", "rev"))


# jacfwd returns the tangents of the batched forward sweep without casting them
# to the inputs' dtype (jvp and vjp do cast), so a rule that computes in float64
# shows here.
MASK_F64_BUG = (
    "tapead bug: maximum/minimum/relu rules build their 0/1 mask with "
    "_mask() -> np.asarray(cond, dtype=np.float64), so float32 tangents become "
    "float64 and ta.jacfwd (which does not cast back) returns float64")
POW_CONST_BASE_BUG = (
    "tapead bug: power(c, y) with c a Python float and y float32: _pow_dy computes "
    "log(c) as an np.float64 scalar, which promotes the float32 tangent to float64; "
    "ta.jacfwd returns float64")
DTYPE_XFAIL: dict = {}   # (name, kind) -> reason; empty since both bugs were fixed


def _dtype_param(case):
    spec, kind = case[0], case[1]
    reason = DTYPE_XFAIL.get((spec.name, None)) or DTYPE_XFAIL.get((spec.name, kind))
    marks = [pytest.mark.xfail(strict=True, raises=AssertionError,
                               reason=reason)] if reason else []
    return pytest.param(case, id=case_id(case), marks=marks)


@pytest.mark.parametrize("case", [_dtype_param(c) for c in _all_cases() if c[3] == F32])
def test_dense_jacobians_keep_float32(case):
    f, _, args = _setup(case)
    nums = tuple(range(len(args)))
    for how, jac in (("jacrev", ta.jacrev), ("jacfwd", ta.jacfwd)):
        for blk in jac(f, nums)(*args):
            assert np.result_type(blk) == F32, f"{how} gave {np.result_type(blk)}"


def test_table_covers_every_scalar_opcode():
    covered = {s.opcode for s in SPECS if s.opcode is not None}
    assert covered == set(OPCODES.values())
    assert all(s.fn is not None and s.np_fn is not None for s in SPECS)
    # every row is checked in both dtypes, to order 2
    assert all(s.orders == (1, 2) and set(s.dtypes) == {F64, F32} for s in SPECS)


def test_table_covers_the_array_primitives():
    names = {s.name.split("_")[0] for s in ARRAY_OPS}
    assert names >= {"sum", "mean", "reshape", "transpose", "broadcast", "getitem",
                     "concatenate", "stack", "matmul", "dot", "where", "outer"}


# ---------------------------------------------------------------------------
# the C scalar kernel vs the Python rules (arrays), to 1e-15
# ---------------------------------------------------------------------------

KERNEL_RTOL = 1e-15     # about 4.5 ulps near 1; exact equality passes trivially

# Documented exceptions (found by this test, reported; not a wrong rule):
# tanh's rule is 1 - a*a with a = tanh(x).  numpy's vectorised np.tanh can be
# 1 ulp away from libm's tanh (the C kernel), and 1 - a*a amplifies an error
# in a by 2a^2 / (1 - a^2), about 26 at |x| = 2: 2.8e-15 observed at x = 1.94
# (C 0.07918883946872324, Python 0.07918883946872302, exact ...321).
KERNEL_RTOL_EXCEPTIONS = {"tanh": 4e-15}


def _rel(a, b):
    a, b = float(a), float(b)
    if a == b:
        return 0.0
    return abs(a - b) / max(abs(a), abs(b))


@pytest.mark.parametrize("name", sorted(OPCODES))
def test_c_kernel_matches_python_rule(name):
    spec = BY_NAME[name]
    op = OPCODES[name]
    nums = tuple(range(spec.arity))
    rng = np.random.default_rng(_seed("kernel", name))
    rtol = KERNEL_RTOL_EXCEPTIONS.get(name, KERNEL_RTOL)
    bad = []
    for _ in range(8):
        pt = spec.sample(rng, ((),) * spec.arity)             # Python floats
        v, d0, d1 = scalar_rule(op, *pt)
        c_partials = (d0, d1)[:spec.arity]
        # the value is numpy's (exactly, or within a couple of ulps)
        assert _rel(v, spec.np_fn(*pt)) <= KERNEL_RTOL, (name, pt, v)
        # reverse mode on Python floats runs the C kernel: exactly its partials
        g_fast = ta.grad(spec.fn, argnums=nums)(*pt)
        assert tuple(map(float, g_fast)) == tuple(c_partials), (name, pt)
        # forward mode on Python floats: dual numbers, same kernel
        for k in nums:
            _, t = ta.jvp(spec.fn, pt, tuple(1.0 if j == k else 0.0 for j in nums))
            assert float(t) == c_partials[k], (name, pt, k)
        # the Python rules, on shape-(1,) arrays, reverse and forward
        arrs = tuple(np.array([p]) for p in pt)
        g_arr = ta.grad(lambda *a: tnp.sum(spec.fn(*a)), argnums=nums)(*arrs)
        for k in nums:
            _, t = ta.jvp(spec.fn, arrs, tuple(np.array([float(j == k)]) for j in nums))
            for how, got in (("vjp", g_arr[k][0]), ("jvp", t[0])):
                if _rel(c_partials[k], got) > rtol:
                    bad.append(f"{name} d/d{'xy'[k]} at {pt}: C {c_partials[k]!r} vs "
                               f"Python {how} rule {float(got)!r} "
                               f"(rel {_rel(c_partials[k], got):.2e})")
    assert not bad, "\n".join(bad)


def test_constant_opcodes_match_binary_kernel():
    """addc/subc/... are the binary kernel with one operand frozen."""
    consts = _core.CONST_OPCODES
    ops = OPCODES
    x, c = 1.7, 0.6
    pairs = {"addc": ("add", (x, c), 0), "subc": ("sub", (x, c), 0),
             "rsubc": ("sub", (c, x), 1), "mulc": ("mul", (x, c), 0),
             "divc": ("div", (x, c), 0), "rdivc": ("div", (c, x), 1),
             "powc": ("pow", (x, c), 0), "rpowc": ("pow", (c, x), 1)}
    assert set(pairs) == set(consts)
    for cname, (bname, xy, k) in pairs.items():
        v, d0, d1 = scalar_rule(consts[cname], x, c)
        vb, *db = scalar_rule(ops[bname], *xy)
        assert v == vb and d0 == db[k], cname
        assert d1 == c, f"{cname}: the constant is kept in p1"


# ---------------------------------------------------------------------------
# the checker fails on wrong rules
# ---------------------------------------------------------------------------

def _sin_with(vjp_rule, jvp_rule):
    p = Primitive("test_sin", np.sin, elementwise=True)
    p.defvjp(vjp_rule)
    p.defjvp(jvp_rule)
    return p


RIGHT_VJP = lambda g, ans, x: g * tnp.cos(x)          # noqa: E731
RIGHT_JVP = lambda t, ans, x: t * tnp.cos(x)          # noqa: E731
POINTS = [(0.7,), (np.array([0.3, -1.2, 2.0]),)]


@pytest.mark.parametrize("args", POINTS, ids=["scalar", "array"])
def test_check_grads_passes_on_right_rules(args):
    prim = _sin_with(RIGHT_VJP, RIGHT_JVP)
    ta.check_grads(lambda x: prim(x), args, order=2)


@pytest.mark.parametrize("args", POINTS, ids=["scalar", "array"])
@pytest.mark.parametrize("which, vjp_rule, jvp_rule, modes, order", [
    ("both wrong", lambda g, a, x: g * tnp.sin(x), lambda t, a, x: t * tnp.sin(x),
     ("fwd", "rev"), 1),
    ("wrong vjp only", lambda g, a, x: -g * tnp.cos(x), RIGHT_JVP, ("fwd", "rev"), 1),
    ("wrong vjp, rev alone", lambda g, a, x: 2.0 * g * tnp.cos(x), RIGHT_JVP, ("rev",), 1),
    ("wrong jvp only", RIGHT_VJP, lambda t, a, x: t * tnp.cos(2.0 * x), ("fwd",), 1),
    # first derivative right, but computed on the concrete value: the rule
    # is not differentiable, so only order 2 can see it
    ("not differentiable vjp", lambda g, a, x: g * np.cos(_core.concrete(x)), RIGHT_JVP,
     ("rev",), 2),
    ("not differentiable jvp", RIGHT_VJP, lambda t, a, x: t * np.cos(_core.concrete(x)),
     ("fwd",), 2),
], ids=lambda v: v if isinstance(v, str) else None)
def test_check_grads_fails_on_wrong_rule(args, which, vjp_rule, jvp_rule, modes, order):
    prim = _sin_with(vjp_rule, jvp_rule)
    with pytest.raises(AssertionError):
        ta.check_grads(lambda x: prim(x), args, order=order, modes=modes)
    if order == 2:      # the same rule passes at order 1
        ta.check_grads(lambda x: prim(x), args, order=1, modes=modes)
