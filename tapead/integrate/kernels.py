"""Fast derivatives of a user's right-hand side at plain values.

scipy's integrators call the right-hand side thousands of times; the
backward (adjoint) and forward-sensitivity solves need, at each call, a
vector-Jacobian product ``lam^T df/d(y, p)`` or the Jacobian of ``f``.  Running
``ta.vjp`` afresh per call costs tens of microseconds of tracing for a
function that takes one.  ``RhsKernel`` records the scalar

    s(y, t, p, lam) = <lam, f(y, t, p)>

once on a tape and replays it at each new point (``Tape.replay``, no Python
tracing), then sweeps it once: the adjoints of ``y`` and ``p`` are the VJP and
the adjoint of ``lam`` is ``f`` itself.  Three ways to record, tried in turn:

1. ``"scalar"``: every element is its own scalar input and the user's
   function sees numpy object arrays of scalar tracers, so the tape holds
   scalar nodes only and replay and sweep run in C (small states: at most
   ``SCALAR_INPUTS_MAX`` numbers in all);
2. ``"array"``: one input node per array, the tracers tapead's transforms use;
3. ``"eager"``: ``ta.vjp`` / ``ta.jacfwd`` at every call (functions that
   cannot be recorded: they read traced values as numbers, run a transform
   inside, or keep flipping their recorded branches).

The tangent system (forward sensitivities, also reverse mode's for small
solves) needs the whole Jacobian ``df/d(y, p)`` at each call: a second
tape holds the function once per state element on copies of the inputs,
``sum_i (1 + c_i) f_i(y^(i), t, p^(i))``, so that one replay and one sweep
give every row of it and ``f`` (``tangent_fun``, ``_record_jacobian``).

A recording is checked once against ``ta.vjp`` at the point where it was
made (values and derivatives agree to rounding) before it is used; one that
disagrees is dropped for the next way.  A replay whose recorded branch
flips (``GuardFlippedError``) records again at the new point.
"""
from __future__ import annotations

import numpy as np

from tapead import _core
from tapead._core import Box, Tape, Tracer
from tapead.errors import GuardFlippedError, ShapeError
from tapead.integrate.compiled import compiled_tangent
import tapead.numpy as tnp
from tapead.transforms import jacfwd, vjp

__all__ = ["RhsKernel", "as_state_vector", "rhs_vjp", "SCALAR_INPUTS_MAX"]

#: at most this many numbers (state, time, parameters, multipliers) are
#: recorded as separate scalar inputs
SCALAR_INPUTS_MAX = 200
#: re-recordings after flipped guards before the kernel turns eager
REPLAYS_FLIPPED_MAX = 50


def as_state_vector(out, y_shape, n, what="func"):
    """The right-hand side's value as a flat vector of ``n`` elements (traced
    or not), after checking that it is shaped like the state."""
    if isinstance(out, (list, tuple)) or (type(out) is np.ndarray and out.dtype == object):
        out = tnp.asarray(out)
    if out is None:
        raise TypeError(f"{what} returned None; it must return dy/dt, an array shaped "
                        f"like y0 {y_shape} (a missing `return` statement?)")
    shape = tuple(_core.shape_of(out)) if isinstance(out, Box) else np.shape(out)
    if shape != tuple(y_shape):
        raise ShapeError(f"{what} returned an array of shape {shape} for a state of shape "
                         f"{tuple(y_shape)}; it must return dy/dt shaped like y0")
    if isinstance(out, Box):
        kind = np.result_type(_core.lanes_of(out)).kind
    else:
        out = np.asarray(out)
        kind = out.dtype.kind
    if kind == "c":
        raise TypeError(f"{what} returned complex values; odeint integrates real states "
                        "(write the real and imaginary parts as separate components)")
    if kind not in "fiub":
        raise TypeError(f"{what} returned values of dtype {np.result_type(out)}; it must "
                        "return a float array")
    if isinstance(out, Box):
        return tnp.reshape(out, (n,))
    return np.asarray(out, dtype=np.float64).reshape(n)


def rhs_vjp(rhs, y, t, p, lam, n_params):
    """``(f, lam^T df/dy, lam^T df/dp)`` of ``rhs(y, t, p)`` by ``ta.vjp`` (an
    empty ``p``, ``n_params == 0``, gets an empty cotangent)."""
    if n_params:
        out, pull = vjp(lambda y_, p_: rhs(y_, t, p_), y, p)
        gy, gp = pull(lam)
    else:
        out, pull = vjp(lambda y_: rhs(y_, t, p), y)
        (gy,), gp = pull(lam), np.zeros(0)
    return out, gy, gp


def _close(a, b):
    """``a`` equals ``b`` to rounding (relative to ``b``'s largest entry)."""
    scale = 1.0 + (float(np.max(np.abs(b))) if b.size else 0.0)
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= 1e-12 * scale))


def _object_array(items, shape):
    """A numpy object array of ``shape`` holding ``items`` (a 0-d shape: the item)."""
    if shape == ():
        return items[0]
    arr = np.empty(len(items), dtype=object)
    for i, x in enumerate(items):
        arr[i] = x
    return arr.reshape(shape)


def _elements(out, y_shape, n):
    """The ``n`` elements of a recorded output (scalar tracers or numbers)."""
    if type(out) is np.ndarray and out.dtype == object:
        if out.shape != tuple(y_shape):
            raise ShapeError(f"func returned an array of shape {out.shape} for a state of "
                             f"shape {tuple(y_shape)}; it must return dy/dt shaped like y0")
        return list(out.ravel())
    if isinstance(out, (list, tuple)):
        return _elements(np.array(out, dtype=object), y_shape, n)
    flat = as_state_vector(out, y_shape, n)
    if isinstance(flat, Box):
        return [flat[i] for i in range(n)]
    return [float(v) for v in flat]


class RhsKernel:
    """``f``, its VJP and its Jacobian at plain values, from one recorded tape.

    Parameters
    ----------
    call : callable
        ``call(y, t, leaves) -> output``: the user's function at state ``y``
        (shaped ``y_shape``), time ``t`` and parameter leaves ``leaves``
        (shaped ``p_shapes``).
    rhs : callable
        ``rhs(y, t, p) -> (n,)`` on flat vectors, written with tapead
        operations (the eager way).
    y_shape, p_shapes : tuple, list of tuple
        Shapes of the state and of the parameter leaves.
    """

    def __init__(self, call, rhs, y_shape, p_shapes):
        self.call, self.rhs = call, rhs
        self.y_shape = tuple(y_shape)
        self.n = int(np.prod(self.y_shape, dtype=np.int64))
        self.p_shapes = [tuple(s) for s in p_shapes]
        self.p = int(sum(int(np.prod(s, dtype=np.int64)) for s in self.p_shapes))
        total = 2 * self.n + 1 + self.p
        self.ways = ["scalar", "array", "eager"] if total <= SCALAR_INPUTS_MAX else \
            ["array", "eager"]
        self.mode = None
        self.tape = None
        self.flipped = 0
        self.jtape, self.jtape_ok = None, True     # the Jacobian tape (tangent_rhs)
        self.zeros_n = [0.0] * self.n

    # -- public: f, VJP, Jacobian ----------------------------------------
    def vjp(self, y, t, p, lam):
        """``(f, lam^T df/dy, lam^T df/dp)`` at plain ``y`` (n,), ``t``, ``p`` (P,)."""
        if self.mode == "eager":
            return self._eager_vjp(y, t, p, lam)
        if self.mode is None:
            self._choose(y, t, p, lam)
            return self.vjp(y, t, p, lam)
        try:
            if self.mode == "scalar":
                self.tape.replay(self._scalar_inputs(y, t, p, lam))
                adj = self.tape.backward([self.out], [1.0], self.ids, dense=True)
                adj = np.asarray(adj, dtype=np.float64)
                n, P = self.n, self.p
                return adj[n + 1 + P:], adj[:n], adj[n + 1:n + 1 + P]
            self.tape.replay(self._array_inputs(y, t, p, lam))
            adj = self.tape.backward([self.out], [1.0], self.ids)
            return self._array_adjoints(adj)
        except GuardFlippedError:
            return self._rerecord(y, t, p, lam)

    def adjoint_rhs(self, z, t, p, p_list):
        """``[-f, lam^T df/dy, lam^T df/dp]`` for ``z = [y, lam, ...]``: the
        adjoint system's right-hand side in one replay and one sweep whose
        adjoints come out in that order (``p_list``: ``p`` as a list)."""
        n = self.n
        if self.mode == "scalar":
            vals = z[:n].tolist()
            vals.append(t)
            vals.extend(p_list)
            vals.extend(z[n:2 * n].tolist())
            try:
                self.tape.replay(vals)
            except GuardFlippedError:
                self._rerecord(z[:n], t, p, z[n:2 * n])
                return self.adjoint_rhs(z, t, p, p_list)
            out = self.tape.backward(self.out_list, self.one, self.adjoint_order, dense=True)
            if type(out) is not np.ndarray:    # a tape with object nodes: a list
                out = np.array(out, dtype=np.float64)
            np.negative(out[:n], out=out[:n])
            return out
        f, gy, gp = self.vjp(z[:n], t, p, z[n:2 * n])
        return np.concatenate([-f, gy, gp])

    def tangent_rhs(self, u, t, p, p_list, Z):
        """``[f, T]`` for ``u = [y, Y]`` (``Y``: ``K`` rows of ``n``): the tangent
        system's right-hand side, ``T[k] = df/dy Y[k] + df/dp Pdot[k]``.  ``Z``
        is a ``(1 + K, n + P + 1)`` work array (``tangent_work``) holding
        ``Pdot``; ``p_list`` is ``p`` as a list.  On a scalar recording ``f``
        and the Jacobian ``J = df/d(y, p)`` come from one replay and one
        reverse sweep of the Jacobian tape (``_record_jacobian``), then
        ``[f; T] = Z [J, f]^T`` in one product."""
        n, P = self.n, self.p
        K = Z.shape[0] - 1
        Y = u[n:].reshape(K, n)
        if self.mode is None:
            self._choose(u[:n], t, p, np.ones(n))
        if self.mode != "scalar":
            f, T = self.jvp(u[:n], t, p, Y, Z[1:, n:n + P])
            return np.concatenate([f, T.ravel()])
        if self.jtape is None and self.jtape_ok:
            self.jtape_ok = self._record_jacobian(u[:n], t, p)
        if self.jtape is not None:
            vals = u[:n].tolist()
            vals.append(t)
            vals.extend(p_list)
            vals *= n
            vals.extend(self.zeros_n)
            tape = self.jtape
            try:
                tape.replay(vals)
            except GuardFlippedError:
                self.jtape = None              # record again here (or stop trying)
                self.flipped += 1
                self.jtape_ok = self.flipped <= REPLAYS_FLIPPED_MAX
                return self.tangent_rhs(u, t, p, p_list, Z)
            r = tape.backward(self.jout, self.one, self.jwrt, dense=True)
            if type(r) is not np.ndarray:     # a tape with object nodes: a list
                r = np.array([0.0 if v is None else v for v in r], dtype=np.float64)
            Jf = r.reshape(n, n + P + 1)       # row i: [df_i/dy, df_i/dp, f_i]
        else:
            f, J = self._jacobian_rows(u[:n], t, p, p_list)
            if J is None:                      # a flipped guard turned the kernel eager
                return self.tangent_rhs(u, t, p, p_list, Z)
            Jf = np.concatenate([J, f[:, None]], axis=1)
        # [f; T] = Z Jf^T with Z = [[0, 0, 1], [Y, Pdot, 0]]
        Z[1:, :n] = Y
        return np.dot(Z, Jf.T).ravel()

    def tangent_fun(self, p, Pdot):
        """``fun(u, t)``: ``tangent_rhs`` at the parameters ``p`` and parameter
        tangents ``Pdot`` (K, P), as one function for scipy to call: the
        Jacobian tape's replay and sweep with everything else bound once."""
        p = np.asarray(p, dtype=np.float64)
        p_list, Z = p.tolist(), self.tangent_work(Pdot)
        n, K = self.n, Pdot.shape[0]
        general = self.tangent_rhs         # records the tapes at its first call
        dot, ndarray = np.dot, np.ndarray
        shape, Y_shape = (n, n + self.p + 1), (K, n)
        zeros = self.zeros_n
        ZY = Z[1:, :n]                     # where Y goes
        fast = {}                          # the tape -> its compiled function, or None

        def fun(u, t):
            tape = self.jtape
            if tape is None:
                return general(u, t, p, p_list, Z)
            if tape not in fast:
                fast.clear()
                fast[tape] = self._compiled(tape, u, t, p, Pdot, general, p_list, Z)
            if fast[tape] is not None:
                return fast[tape](u, t)
            vals = u[:n].tolist()
            vals.append(t)
            vals.extend(p_list)
            vals *= n
            vals.extend(zeros)
            try:
                tape.replay(vals)
            except GuardFlippedError:
                return general(u, t, p, p_list, Z)
            r = tape.backward(self.jout, self.one, self.jwrt, dense=True)
            if type(r) is not ndarray:
                return general(u, t, p, p_list, Z)
            ZY[...] = u[n:].reshape(Y_shape)
            return dot(Z, r.reshape(shape).T).ravel()
        return fun

    def _compiled(self, tape, u, t, p, Pdot, general, p_list, Z):
        """The compiled tangent right-hand side of the Jacobian tape
        (``tapead.integrate.compiled``), checked once against the tape's own
        at ``(u, t)``; None while there is none (or it disagrees)."""
        fun = compiled_tangent(tape, self.jout[0], self.n, self.p, p, Pdot, calls=1000)
        if fun is None:
            return None
        if not _close(fun(u, t), general(u, t, p, p_list, Z)):
            return None                    # not the tape's numbers: keep the tape
        return fun

    def tangent_work(self, Pdot):
        """The work array of ``tangent_rhs`` for the parameter tangents
        ``Pdot`` (K, P): ``[[0, 0, 1], [Y, Pdot, 0]]``, ``(1 + K, n + P + 1)``."""
        K, n, P = Pdot.shape[0], self.n, self.p
        Z = np.zeros((1 + K, n + P + 1))
        Z[0, -1] = 1.0
        Z[1:, n:n + P] = Pdot
        return Z

    def _jacobian_rows(self, y, t, p, p_list):
        """``(f, J)`` from the scalar recording: one replay and ``n`` reverse
        sweeps, one per element of ``f`` (``J`` None: the kernel turned eager)."""
        n = self.n
        vals = y.tolist()
        vals.append(t)
        vals.extend(p_list)
        vals.extend(self.zeros_n)
        tape = self.tape
        try:
            tape.replay(vals)
        except GuardFlippedError:
            self._rerecord(y, t, p, np.zeros(n))
            if self.mode != "scalar":
                return None, None
            return self._jacobian_rows(y, t, p, p_list)
        J, one, jac_ids = np.zeros((n, n + self.p)), self.one, self.jac_ids
        f = np.empty(n)
        for i, (node, const) in enumerate(self.elems):
            if node < 0:
                f[i] = const           # a constant element: its row of J is zero
            else:
                f[i] = tape.value(node)
                row = tape.backward([node], one, jac_ids, dense=True)
                J[i] = [0.0 if v is None else v for v in row] if type(row) is not \
                    np.ndarray else row
        return f, J

    def _record_jacobian(self, y, t, p):
        """Record ``sum_i (1 + c_i) f_i(y^(i), t^(i), p^(i))`` on ``n`` copies of
        the inputs (copy ``i`` contributes element ``i``) and ``n`` inputs
        ``c_i``, replayed at ``c = 0``: one reverse sweep of this tape gives
        every row of the Jacobian, ``df_i/d(y^(i), p^(i))``, and ``f`` itself
        (the adjoints of ``c``).
        False when the function cannot be recorded so or the Jacobian
        disagrees with the row-by-row sweeps of the scalar recording here."""
        n, P = self.n, self.p
        w = n + 1 + P
        tape = Tape()
        started = _core.traces_started()
        try:
            xs = tape.input_many((y.tolist() + [float(t)] + p.tolist()) * n + [0.0] * n)
            s, elems = None, []
            for i in range(n):
                blk = xs[i * w:(i + 1) * w]
                leaves, off = [], n + 1
                for sh in self.p_shapes:
                    m = int(np.prod(sh, dtype=np.int64))
                    leaves.append(_object_array(blk[off:off + m], sh))
                    off += m
                e = _elements(self.call(_object_array(blk[:n], self.y_shape), blk[n],
                                        leaves), self.y_shape, n)[i]
                elems.append(e)
                s = e if s is None else s + e
            for i, e in enumerate(elems):      # c_i = 0: the adjoint of c_i is f_i
                s = s + xs[n * w + i] * e
        except Exception:            # noqa: BLE001  (the row-by-row sweeps stay)
            return False
        finally:
            tape.active = False
        if (_core.traces_started() - started > 1 or tape.values_read
                or not (type(s) is Tracer and s.tape is tape)):
            return False
        self.jtape, self.jout = tape, [s.idx]
        self.jwrt = [xs[k].idx for i in range(n)      # row i: y^(i), p^(i), c_i
                     for k in list(range(i * w, i * w + n)) +
                     list(range(i * w + n + 1, (i + 1) * w)) + [n * w + i]]
        self.jtape_ok = False              # no second recording while checking this one
        try:                               # the unit directions: T = J^T
            got = self.tangent_rhs(np.concatenate([y, np.eye(n + P, n).ravel()]), t, p,
                                   p.tolist(), self.tangent_work(np.eye(n + P, P, -n)))
        except Exception:            # noqa: BLE001  (a recording that cannot replay)
            got = None
        f, J = self._jacobian_rows(y, t, p, p.tolist())
        if got is None or J is None or not _close(got[:n], f) or \
                not _close(got[n:].reshape(n + P, n), J.T):
            self.jtape = None
            return False
        return True

    def jvp(self, y, t, p, Y, Pdot):
        """``(f, T)``: ``T[k] = df/dy Y[k] + df/dp Pdot[k]`` for the ``K`` rows of
        ``Y`` (K, n) and ``Pdot`` (K, P): from the recorded tape's Jacobian (n
        sweeps) when it holds scalar nodes only or when K is not smaller than
        n + P, else the K directions in one forward sweep of ``rhs``."""
        if self.mode is None:
            self._choose(y, t, p, np.ones(self.n))
        K = Y.shape[0]
        if self.mode == "scalar" or K >= self.n + self.p:
            f, Jy, Jp = self.jacobian(y, t, p)
            return f, Y @ Jy.T + Pdot @ Jp.T
        f = np.asarray(self.rhs(y, t, p), dtype=np.float64)
        T = jacfwd(lambda c: self.rhs(y + c @ Y, t, p + c @ Pdot))(np.zeros(K))
        return f, np.asarray(T, dtype=np.float64).reshape(self.n, K).T

    def jacobian(self, y, t, p):
        """``(f, df/dy (n, n), df/dp (n, P))`` at plain values."""
        if self.mode is None:
            self._choose(y, t, p, np.ones(self.n))
        if self.mode != "scalar":
            return self._eager_jacobian(y, t, p)
        lam = np.zeros(self.n)
        try:
            self.tape.replay(self._scalar_inputs(y, t, p, lam))
        except GuardFlippedError:
            self._rerecord(y, t, p, lam)
            return self.jacobian(y, t, p)
        n, P = self.n, self.p
        f = np.empty(n)
        Jy, Jp = np.zeros((n, n)), np.zeros((n, P))
        for i, (node, const) in enumerate(self.elems):
            if node < 0:
                f[i] = const
                continue
            f[i] = self.tape.value(node)
            adj = np.asarray(self.tape.backward([node], [1.0], self.ids[:n + 1 + P],
                                                dense=True), dtype=np.float64)
            Jy[i], Jp[i] = adj[:n], adj[n + 1:]
        return f, Jy, Jp

    # -- recording ---------------------------------------------------------
    def _choose(self, y, t, p, lam):
        """Record by the first way that works and agrees with ``ta.vjp`` here."""
        while self.ways:
            way = self.ways[0]
            if way == "eager":
                self.mode = "eager"
                return
            if self._record(way, y, t, p, lam) and self._agrees(y, t, p, lam):
                self.mode = way
                return
            self.ways.pop(0)
            self.tape = None

    def _rerecord(self, y, t, p, lam):
        self.flipped += 1
        if self.flipped > REPLAYS_FLIPPED_MAX or not self._record(self.mode, y, t, p, lam):
            self.mode, self.tape = "eager", None
        return self.vjp(y, t, p, lam)

    def _scalar_inputs(self, y, t, p, lam):
        return y.tolist() + [float(t)] + p.tolist() + lam.tolist()

    def _array_inputs(self, y, t, p, lam):
        vals = [y.reshape(self.y_shape) if self.y_shape else float(y[0]), float(t)]
        off = 0
        for s in self.p_shapes:
            m = int(np.prod(s, dtype=np.int64))
            vals.append(p[off:off + m].reshape(s) if s else float(p[off]))
            off += m
        vals.append(np.array(lam, dtype=np.float64))
        return vals

    def _array_adjoints(self, adj):
        def dense(a, shape):
            if a is None:
                return np.zeros(shape)
            return np.asarray(a, dtype=np.float64).reshape(shape)
        gy = dense(adj[0], (self.n,))
        gp = [dense(a, (int(np.prod(s, dtype=np.int64)),)) for a, s in
              zip(adj[2:2 + len(self.p_shapes)], self.p_shapes)]
        gp = np.concatenate(gp) if gp else np.zeros(0)
        f = dense(adj[-1], (self.n,))
        return f, gy, gp

    def _record(self, way, y, t, p, lam):
        """Record ``s`` at this point; False when the function cannot be recorded
        this way (it raised, read a traced value as a number, or ran a
        transform inside)."""
        tape = Tape()
        started = _core.traces_started()
        try:
            if way == "scalar":
                xs = tape.input_many(self._scalar_inputs(y, t, p, lam))
                n = self.n
                ys = _object_array(xs[:n], self.y_shape)
                leaves, off = [], n + 1
                for s in self.p_shapes:
                    m = int(np.prod(s, dtype=np.int64))
                    leaves.append(_object_array(xs[off:off + m], s))
                    off += m
                out = self.call(ys, xs[n], leaves)
                elems = _elements(out, self.y_shape, n)
                s = None
                for lam_i, e in zip(xs[off:], elems):
                    s = lam_i * e if s is None else s + lam_i * e
                ids = list(range(len(xs)))
                self.elems = [(e.idx, 0.0) if type(e) is Tracer and e.tape is tape
                              else (-1, float(_core.concrete(e))) for e in elems]
            else:
                xs = tape.input_many(self._array_inputs(y, t, p, lam))
                out = self.call(xs[0], xs[1], xs[2:-1])
                s = tnp.sum(xs[-1] * as_state_vector(out, self.y_shape, self.n))
                ids = list(tape.inputs)
        except Exception:            # noqa: BLE001  (the next way decides; eager re-raises)
            return False
        finally:
            tape.active = False
        if (_core.traces_started() - started > 1 or tape.values_read
                or not (type(s) is Tracer and s.tape is tape)):
            return False
        self.tape, self.out, self.ids = tape, s.idx, ids
        self.out_list, self.one = [s.idx], [1.0]
        n, P = self.n, self.p
        self.adjoint_order = ids[n + 1 + P:] + ids[:n] + ids[n + 1:n + 1 + P]
        self.jac_ids = ids[:n] + ids[n + 1:n + 1 + P]
        return True

    def _agrees(self, y, t, p, lam):
        """The recording's values and derivatives equal ``ta.vjp``'s here."""
        mode, self.mode = self.mode, "scalar" if self.ways[0] == "scalar" else "array"
        try:
            got = self.vjp(y, t, p, lam)
        except Exception:            # noqa: BLE001  (a recording that cannot replay)
            return False
        finally:
            self.mode = mode
        want = self._eager_vjp(y, t, p, lam)
        for a, b in zip(got, want):
            scale = 1.0 + (float(np.max(np.abs(b))) if b.size else 0.0)
            if a.shape != b.shape or not np.all(np.abs(a - b) <= 1e-12 * scale):
                return False
        return True

    # -- eager: tapead's transforms at every call ----------------------------
    def _eager_vjp(self, y, t, p, lam):
        out, gy, gp = rhs_vjp(self.rhs, y, t, p, lam, self.p)
        return (np.asarray(out, dtype=np.float64), np.asarray(gy, dtype=np.float64),
                np.asarray(gp, dtype=np.float64))

    def _eager_jacobian(self, y, t, p):
        f = np.asarray(self.rhs(y, t, p), dtype=np.float64)
        if self.p:
            Jy, Jp = jacfwd(lambda y_, p_: self.rhs(y_, t, p_), argnums=(0, 1))(y, p)
        else:
            Jy, Jp = jacfwd(lambda y_: self.rhs(y_, t, p))(y), np.zeros((self.n, 0))
        return f, np.asarray(Jy, dtype=np.float64), np.asarray(Jp, dtype=np.float64)
