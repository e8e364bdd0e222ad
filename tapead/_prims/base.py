"""The ``Primitive`` object: one home for a primitive's rules.

A primitive bundles its primal implementation (a numpy function), one VJP
rule and one JVP rule per differentiable argument, its batched JVP
(``defbatched``: K directions at once) and its sparsity rule
(``defsparsity``: which input elements each output element depends on).
Rules are written with ``tapead.numpy`` operations, so they are themselves
differentiable (that is how second derivatives work).  Every primitive
declares a batching and a sparsity rule, or says explicitly that it has none
(``PER_DIRECTION``, ``patterns.DENSE`` with a reason); the family helpers
(``defelementwise``, ``defzero``) declare both for a whole family;
structural primitives pair their batched rule with ``patterns.MOVE``.

``defvmap`` registers the primitive's ``vmap`` rule (how it runs once on
stacked lanes, see ``tapead._prims.batching``), or declares ``PER_LANE``:
vmap then runs it once per lane.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np

from tapead import _core, patterns
from tapead.errors import MissingRuleError


ShapeOnly = _core.ShapeOnly


class _Declared:
    """A named stand-in for a rule: a declared fallback, not a function."""

    def __init__(self, name: str, doc: str):
        self.name = name
        self.__doc__ = doc

    def __repr__(self):
        return self.name


#: declared batching fallback: the JVP once per direction (correct, K times the work)
PER_DIRECTION = _Declared("PER_DIRECTION", "batched JVP = the JVP once per direction")
#: declared batching of elementwise primitives: their JVP rules broadcast over
#: the leading direction axis (``Primitive.jvp_many``)
BROADCAST = _Declared("BROADCAST", "elementwise: the JVP broadcast over the directions")
#: declared vmap fallback: the primitive runs once per lane (correct, n calls)
PER_LANE = _Declared("PER_LANE", "vmap runs the primitive once per lane")
#: declared vmap rule of elementwise primitives: the lanes stacked in front,
#: every operand padded to the output's rank, one call
VMAP_ELEMENTWISE = _Declared("VMAP_ELEMENTWISE",
                             "vmap: lanes in front, operands padded to one rank")


def _no_tangent(tans, ans, vals, params, K):
    """Batched JVP of a primitive whose derivative is zero."""
    return None


class Primitive(_core.PrimitiveBase):
    """A differentiable operation.

    Parameters
    ----------
    name : str
        The name used in error messages and listings.
    impl : callable
        ``impl(*args, **params)`` on plain values (numpy arrays, floats).
    saves : sequence of int or None
        Argument positions whose values the VJP rules read.  ``None`` keeps
        all of them; the others are replaced by a ``ShapeOnly`` so the tape
        does not hold memory it does not need.  The output is always kept.
    opcode : int
        Scalar opcode of the C kernel (``-1`` for none).
    linear : bool
        True when the primitive is linear in its (single) differentiable
        argument: its JVP is the primitive applied to the tangent.
    """

    def __init__(self, name: str, impl: Callable, *, saves: Optional[Sequence[int]] = None,
                 opcode: int = -1, linear: bool = False, elementwise: bool = False):
        self.name = name
        self.impl = impl
        self.saves = None if saves is None else frozenset(saves)
        self.opcode = opcode
        self.linear = linear
        self.elementwise = elementwise
        self.static_args = frozenset()
        #: its impl keeps state that another node's rule reads (a loop's forward
        #: run, which its reverse node reverses): replays run it even when no
        #: output needs its value
        self.replay_always = False
        #: argument positions the primitive has no derivative through (hints);
        #: forward sweeps need not compute their tangents
        self.nondiff_args = frozenset()
        self.vjps = []
        self.jvps = []
        self.vjp_any = None
        self.jvp_any = None
        self.jvp_batched = None
        self.save_fn = None
        self.fwd_saved = None
        #: the declared batched JVP (a rule, PER_DIRECTION or BROADCAST; None: undeclared)
        self.batching = None
        #: the sparsity rule (tapead.patterns; None: undeclared) and why it is
        #: the dense fallback when it is
        self.sparsity = None
        self.sparsity_reason = None
        #: the vmap rule ``rule(args, bdims, **params) -> (out, out_bdim)``,
        #: ``PER_LANE`` or ``VMAP_ELEMENTWISE`` (None: undeclared, per lane with a warning)
        self.vmap_rule = None
        #: how a fused replay computes it (tapead.compiler.fusion): ``(ufunc,
        #: argument positions)``; None: ``impl`` itself when it is a ufunc
        self.fused_as = None

    # -- registration ----------------------------------------------------
    def defvjp(self, *rules: Optional[Callable]) -> "Primitive":
        """One rule per argument: ``rule(g, ans, *args, **params) -> cotangent``."""
        self.vjps = list(rules)
        return self

    def defjvp(self, *rules: Optional[Callable]) -> "Primitive":
        """One rule per argument: ``rule(t, ans, *args, **params) -> tangent``."""
        self.jvps = list(rules)
        return self

    def defvjp_any(self, rule: Callable) -> "Primitive":
        """A rule for every argument: ``rule(k, g, ans, *args, **params)``."""
        self.vjp_any = rule
        return self

    def defjvp_any(self, rule: Callable) -> "Primitive":
        """A rule for every argument: ``rule(k, t, ans, *args, **params)``."""
        self.jvp_any = rule
        return self

    def defbatched(self, rule) -> "Primitive":
        """The batched JVP: ``rule(tans, ans, vals, params, K)``, where ``tans[k]``
        is the tangent of argument k with a leading axis of K directions (None
        for zero); returns the output tangents ``(K,) + ans.shape`` (None for
        zero).  ``PER_DIRECTION`` declares that the JVP runs once per direction;
        ``BROADCAST`` (elementwise primitives) that the JVP rules broadcast."""
        if rule is None:
            raise TypeError(f"{self.name}.defbatched(None): pass a rule, PER_DIRECTION "
                            "or BROADCAST")
        if rule is BROADCAST and not self.elementwise:
            raise TypeError(f"{self.name}.defbatched(BROADCAST): only elementwise "
                            "primitives broadcast their JVP over directions")
        self.batching = rule
        self.jvp_batched = None if isinstance(rule, _Declared) else rule
        return self

    def defvmap(self, rule) -> "Primitive":
        """The vmap rule ``rule(args, bdims, **params) -> (out, out_bdim)``: ``args``
        hold the stacked lanes of the batched arguments (``bdims[k]`` is the
        lane axis of argument k, None for an argument every lane shares), the
        rule applies the primitive once to all lanes with tapead operations
        (so outer transforms record it) and says where the lane axis of its
        output is (None: the same for every lane).  ``PER_LANE`` declares that
        vmap runs the primitive once per lane."""
        if rule is None or not (callable(rule) or rule in (PER_LANE, VMAP_ELEMENTWISE)):
            raise TypeError(f"{self.name}.defvmap({rule!r}): pass a rule or PER_LANE")
        if rule is VMAP_ELEMENTWISE and not self.elementwise:
            raise TypeError(f"{self.name}.defvmap(VMAP_ELEMENTWISE): only elementwise "
                            "primitives batch by padding their operands")
        self.vmap_rule = rule
        self.vmap_elementwise = rule is VMAP_ELEMENTWISE
        return self

    def defsparsity(self, rule: Callable, reason: Optional[str] = None) -> "Primitive":
        """The sparsity rule ``rule(rec, pats, shapes, out_shape, N) -> pattern``
        (see :mod:`tapead.patterns`): valid at every point, since a pattern is
        reused across points.  ``reason`` says why the pattern is coarser than
        the nonzeros at a point; ``patterns.DENSE`` (every output element
        depends on everything the inputs depend on) needs one."""
        if not callable(rule):
            raise TypeError(f"{self.name}.defsparsity: the rule must be callable, got "
                            f"{rule!r}")
        if rule is patterns.DENSE and not reason:
            raise TypeError(f"{self.name}.defsparsity(DENSE) needs reason=...: say why "
                            "the structural pattern is dense")
        self.sparsity = rule
        self.sparsity_reason = reason
        return self

    # -- forward mode (the core calls these) --------------------------
    def jvp(self, k: int, t, ans, vals: tuple, params: dict):
        if self.linear:
            args = list(vals)
            for j in range(len(args)):
                if j != k and j not in self.static_args:
                    args[j] = np.zeros(np.shape(args[j]),
                                       dtype=np.result_type(_core.lanes_of(args[j])))
            args[k] = t
            out = self.impl(*args, **params) if not any(
                isinstance(a, _core.Box) for a in args) else _core.bind(self, *args, **params)
            return out
        if k < len(self.jvps) and self.jvps[k] is not None:
            out = self.jvps[k](t, ans, *vals, **params)
        elif self.jvp_any is not None:
            out = self.jvp_any(k, t, ans, *vals, **params)
        else:
            raise MissingRuleError(
                f"primitive '{self.name}' has no JVP (forward-mode) rule for argument {k}; "
                "register one with defjvp, or wrap the function in ta.custom_jvp")
        if out is None:                      # no derivative through this argument
            return None
        if self.elementwise and np.shape(out) != np.shape(ans):
            out = np.broadcast_to(out, np.shape(ans))   # a box: tapead's, by NEP 18
        return out

    def jvp_linear(self, args: tuple, trace, vals: tuple, params: dict):
        """The tangent of a linear primitive for all its arguments at once:
        the primitive applied to the tangents of ``trace``'s duals, zeros for
        the other arguments (static arguments kept)."""
        tans = list(vals)
        for j, x in enumerate(args):
            if type(x) is _core.Dual and x.ftrace is trace:
                tans[j] = x.tangent
            elif j not in self.static_args:
                tans[j] = np.zeros(np.shape(vals[j]),
                                   dtype=np.result_type(_core.lanes_of(vals[j])))
        if any(isinstance(a, _core.Box) for a in tans):
            return _core.bind(self, *tans, **params)
        return self.impl(*tans, **params)

    def jvp_many(self, tans: list, ans, vals: tuple, params: dict, K: int):
        """Tangents with a leading axis of K directions (None = zero)."""
        shape = (K,) + np.shape(ans)
        if self.elementwise:
            total = None
            for k, t in enumerate(tans):
                if t is None:
                    continue
                want = (K,) + (1,) * (len(shape) - 1 - np.ndim(vals[k])) + np.shape(vals[k])
                if np.shape(t) != want:
                    t = np.reshape(t, want)
                if self.jvps and k < len(self.jvps) and self.jvps[k] is not None:
                    c = self.jvps[k](t, ans, *vals, **params)
                else:
                    c = self.jvp_any(k, t, ans, *vals, **params)
                if c is not None:            # None: no derivative through this argument
                    total = c if total is None else total + c
            if total is None or np.shape(total) == shape:
                return total
            return np.broadcast_to(total, shape)
        if self.jvp_batched is not None:
            return self.jvp_batched(tans, ans, vals, params, K)
        rows = []                            # one jvp per direction
        for d in range(K):
            acc = None
            for k, t in enumerate(tans):
                if t is not None:
                    c = self.jvp(k, t[d], ans, vals, params)
                    if c is not None:        # None: no derivative through this argument
                        acc = c if acc is None else acc + c
            rows.append(acc)
        if all(r is None for r in rows):
            return None
        dtype = np.result_type(_core.lanes_of(ans))
        if any(isinstance(r, _core.Box) for r in rows):   # traced by an outer transform
            zero = np.zeros(np.shape(ans), dtype=dtype)  # np.stack/np.broadcast_to of
            return np.stack([zero if r is None else      # boxes: tapead's, by NEP 18
                             np.broadcast_to(r, np.shape(ans)) for r in rows])
        out = np.zeros(shape, dtype=dtype)
        for d, r in enumerate(rows):
            if r is not None:
                _core.check_derivative_kind(self, r, ans)
                out[d] += r
        return out


# ---------------------------------------------------------------------------
# family helpers: batching and sparsity for a whole family at once
# ---------------------------------------------------------------------------

def defelementwise(prim: Primitive, args=None) -> Primitive:
    """Elementwise family: the JVP broadcasts over directions; output element e
    depends on element e of every operand (of ``args`` only, when given)."""
    prim.defbatched(BROADCAST)
    prim.defvmap(VMAP_ELEMENTWISE)
    return prim.defsparsity(patterns.ELEMENTWISE if args is None
                            else patterns.elementwise_in(*args))


def defzero(prim: Primitive) -> Primitive:
    """Zero-derivative family (floor, sign, stop_gradient...): no tangent in any
    direction, empty pattern."""
    prim.defbatched(_no_tangent)
    if prim.elementwise:
        prim.defvmap(VMAP_ELEMENTWISE)
    return prim.defsparsity(patterns.ZERO)

