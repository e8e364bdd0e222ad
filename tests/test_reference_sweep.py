"""The C reverse sweep against a tiny pure-Python reference sweep.

Random scalar programs (hypothesis, and one large seeded one) are recorded
on a ``Tape``.  The reference reads the tape through ``tape.node(i)`` ->
``(opcode, a, b, value, p0, p1)`` and sweeps it in Python:

* opcodes 0, 1, 2 are input, object and guard nodes (no scalar rule);
* binary opcodes 10..29: ``adj[a] += g * p0; adj[b] += g * p1``;
* constant opcodes 30..49 (the constant is in p1, b == -1) and unary
  opcodes >= 50: ``adj[a] += g * p0``.

Its adjoints of every node must equal ``tape.backward`` to 1e-15.  Also:
every recorded node's value and partials are the C kernel's at its
operands, the sweep counts the same steps, and a replay at new inputs
gives the tape a fresh recording would.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tapead.numpy as tnp
from tapead import GuardFlippedError
from tapead._core import (BINARY_OPCODES, CONST_OPCODES, OPCODES, STRUCTURAL_OPCODES, Tape,
                          scalar_rule)

from opspecs import AwayFromZero, ELEMENTWISE, Interval, Lattice

OP_INPUT, OP_OBJ, OP_GUARD = (STRUCTURAL_OPCODES[k] for k in ("input", "obj", "guard"))
FIRST_BINARY, FIRST_CONST, FIRST_UNARY = 10, 30, 50
UNARY = [s for s in ELEMENTWISE if s.arity == 1]
BINARY = [s for s in ELEMENTWISE if s.arity == 2]
CONST_FORMS = sorted(CONST_OPCODES)


# ---------------------------------------------------------------------------
# the reference
# ---------------------------------------------------------------------------

def reference_sweep(tape, outputs, seeds):
    """Adjoint of every node, and the number of nodes with a nonzero adjoint."""
    n = tape.n_nodes
    adj = [0.0] * n
    for i, s in zip(outputs, seeds):
        adj[i] += float(s)
    steps = 0
    for i in range(max(outputs), -1, -1):
        op, a, b, _, p0, p1 = tape.node(i)
        g = adj[i]
        if g == 0.0:
            continue
        steps += 1
        if op >= FIRST_BINARY:
            adj[a] += g * p0
            if op < FIRST_CONST:
                adj[b] += g * p1
    return adj, steps


def check_tape(tape, outputs, seeds):
    """Structure and partials of every node, then reference vs C sweep."""
    nodes = [tape.node(i) for i in range(tape.n_nodes)]
    for i, (op, a, b, v, p0, p1) in enumerate(nodes):
        assert op != OP_OBJ, "the reference handles scalar tapes only"
        if op in (OP_INPUT, OP_GUARD):
            assert a == b == -1
            continue
        assert 0 <= a < i
        if op < FIRST_CONST:
            assert op in BINARY_OPCODES and 0 <= b < i
            y = nodes[b][3]
        else:
            assert b == -1
            y = p1 if op < FIRST_UNARY else 0.0     # constant ops keep c in p1
        kv, k0, k1 = scalar_rule(op, nodes[a][3], y)
        assert (v, p0) == (kv, k0), f"node {i}: recorded ({v}, {p0}) vs kernel ({kv}, {k0})"
        if op < FIRST_UNARY:
            assert p1 == k1, f"node {i}: p1 {p1} vs kernel {k1}"
    want, steps = reference_sweep(tape, outputs, seeds)
    got = tape.backward(outputs, seeds, range(tape.n_nodes), dense=True)
    assert isinstance(got, np.ndarray) and got.shape == (tape.n_nodes,)
    for i, (x, y) in enumerate(zip(got, want)):
        assert x == y or abs(x - y) <= 1e-15 * max(abs(x), abs(y)), \
            f"node {i} ({nodes[i][0]}): C {x!r} vs reference {y!r}"
    assert tape.last_sweep_steps == steps
    # the list form (inputs only) agrees with the dense form
    lst = tape.backward(outputs, seeds, tape.inputs)
    assert [float(x) for x in lst] == [float(got[i]) for i in tape.inputs]
    return got


# ---------------------------------------------------------------------------
# random scalar programs
# ---------------------------------------------------------------------------

def _bounds(dom, flip):
    if isinstance(dom, Interval):
        return dom.lo, dom.hi
    if isinstance(dom, (AwayFromZero, Lattice)):
        return (-dom.hi, -dom.lo) if flip else (dom.lo, dom.hi)
    raise TypeError(dom)


def _squash(z, lo, hi):
    """Into (lo, hi): sigmoid, then the constant opcodes mulc and addc."""
    return lo + (hi - lo) * tnp.sigmoid(z)


def run_program(program, xs):
    """Apply the instructions to the boxed inputs ``xs``; every value made."""
    vals = list(xs)
    for kind, k, i, j, c, flip in program:
        x, y = vals[i % len(vals)], vals[j % len(vals)]
        if kind == "unary":
            spec = UNARY[k % len(UNARY)]
            vals.append(spec.fn(_squash(x, *_bounds(spec.domain[0], flip))))
        elif kind == "binary":
            spec = BINARY[k % len(BINARY)]
            vals.append(spec.fn(_squash(x, *_bounds(spec.domain[0], flip)),
                                _squash(y, *_bounds(spec.domain[1], flip))))
        elif kind == "const":                    # one operand a Python float
            x = _squash(x, -2.0, 2.0)
            form = CONST_FORMS[k % len(CONST_FORMS)]
            big = 0.5 + abs(c)                   # a constant away from 0, > 0.5
            vals.append({"addc": lambda: x + c, "subc": lambda: x - c,
                         "rsubc": lambda: c - x, "mulc": lambda: x * c,
                         "divc": lambda: x / (big if flip else -big),
                         "rdivc": lambda: c / _squash(x, 0.5, 2.0),
                         "powc": lambda: _squash(x, 0.5, 2.5) ** c,
                         "rpowc": lambda: big ** _squash(x, -2.0, 2.0)}[form]())
        else:                                    # a Python branch: a guard node
            x, y = _squash(x, -2.0, 2.0), _squash(y, -2.0, 2.0)
            vals.append(x * y if x > y else x - y)
    return vals


KINDS = ["unary", "binary", "const", "guard"]
instructions = st.tuples(st.sampled_from(KINDS), st.integers(0, 99), st.integers(0, 999),
                         st.integers(0, 999), st.floats(-2.0, 2.0, allow_nan=False),
                         st.booleans())


def _record(program, inputs):
    tape = Tape()
    vals = run_program(program, tape.input_many(list(inputs)))
    return tape, vals


@settings(max_examples=60, deadline=None)
@given(program=st.lists(instructions, min_size=1, max_size=40),
       inputs=st.lists(st.floats(-2.0, 2.0, allow_nan=False), min_size=1, max_size=4),
       data=st.data())
def test_c_sweep_equals_reference_sweep(program, inputs, data):
    tape, vals = _record(program, inputs)
    n_out = data.draw(st.integers(1, 3))
    outputs = [vals[data.draw(st.integers(0, len(vals) - 1))].idx for _ in range(n_out)]
    seeds = data.draw(st.lists(st.floats(-3.0, 3.0, allow_nan=False),
                               min_size=n_out, max_size=n_out))
    check_tape(tape, outputs, seeds)

    # replay at new inputs == a fresh recording there (unless a branch flips)
    new = [x + 0.25 for x in inputs]
    try:
        tape.replay(new)
    except GuardFlippedError:
        return
    fresh, _ = _record(program, new)
    assert fresh.n_nodes == tape.n_nodes
    for i in range(tape.n_nodes):
        assert tape.node(i) == fresh.node(i), f"node {i} after replay"
    check_tape(tape, outputs, seeds)


def test_every_scalar_opcode_is_exercised():
    """The instruction set reaches every binary, constant and unary opcode."""
    program = ([("unary", k, 0, 0, 0.5, False) for k in range(len(UNARY))]
               + [("binary", k, 0, 1, 0.5, False) for k in range(len(BINARY))]
               + [("const", k, 0, 1, 0.5, False) for k in range(len(CONST_FORMS))]
               + [("guard", 0, 0, 1, 0.5, False)])
    tape, vals = _record(program, [0.3, -0.7])
    seen = {tape.node(i)[0] for i in range(tape.n_nodes)}
    assert seen >= set(OPCODES.values()) | set(CONST_OPCODES.values()) | {
        OP_INPUT, OP_GUARD}
    check_tape(tape, [vals[-1].idx, vals[len(UNARY) + 1].idx], [1.0, -2.0])


def test_large_seeded_tape():
    """A 20 000-node tape from a seeded generator; int and float seeds."""
    rng = np.random.default_rng(2024)
    n = 4000
    program = list(zip(rng.choice(KINDS, n, p=[0.4, 0.3, 0.25, 0.05]).tolist(),
                       rng.integers(0, 99, n).tolist(),
                       (np.arange(n) + 8 - rng.integers(0, 8, n)).tolist(),
                       rng.integers(0, 10**6, n).tolist(),
                       rng.uniform(-2, 2, n).tolist(),
                       rng.integers(0, 2, n).astype(bool).tolist()))
    tape, vals = _record(program, rng.uniform(-2, 2, 8).tolist())
    assert tape.n_nodes > 10000
    check_tape(tape, [vals[-1].idx, vals[-2].idx, vals[n // 2].idx], [1, 0.5, -3])


def test_unreached_nodes_have_zero_adjoint():
    tape = Tape()
    x, y = tape.input_many([0.5, 2.0])
    u = tnp.sin(x) * y
    tnp.exp(y)                                 # recorded after u: never reached
    adj = check_tape(tape, [u.idx], [1.0])
    assert adj[-1] == 0.0
    assert tape.last_sweep_steps == 4          # u, sin, y, x


@pytest.mark.parametrize("seed", [0.0, 1.0])
def test_zero_and_unit_seed(seed):
    tape = Tape()
    x, = tape.input_many([0.7])
    z = tnp.log(tnp.cosh(x)) + x ** 3.0
    adj = check_tape(tape, [z.idx], [seed])
    assert adj[0] == pytest.approx(seed * (np.tanh(0.7) + 3 * 0.7 ** 2), rel=1e-14)
