"""``ta.jit``: record a function once per input signature, replay its tape in C.

The first call with a given signature (the pytree structure of the
arguments, the shapes and dtypes of their float leaves, the types of Python
scalars, the values of everything else) runs the Python function once on a
fresh tape; later calls with that signature re-evaluate the recorded tape at
the new values (``Tape.evaluate`` / ``Tape.replay``) without running Python.
A replay whose recorded branch no longer holds (``GuardFlippedError``) or
whose array shapes change (``TapeReplayError``) records the function again at
those inputs.  ``ta.jit(ta.grad(f))`` and ``ta.jit(ta.value_and_grad(f))``
replay ``f``'s tape and run one reverse sweep.
"""
from __future__ import annotations

import collections
import functools
import threading
from typing import Callable, NamedTuple, Sequence, Union

import numpy as np

from tapead import _core
from tapead._core import Box, Tape, Tracer
from tapead._tree import TreeDef, tree_flatten, tree_unflatten
from tapead.errors import GuardFlippedError, TapeReplayError
from tapead.boxing import (
    Where as _Where, normalize_argnums as _argnums, check_kinds as _check_kinds,
    check_leaf as _check_leaf, check_scalar_output as _check_scalar_output,
    grads as _grads, pack_outputs as _pack_outputs, plain as _plain,
    split_aux as _split_aux, unbox_out as _unbox_out, as_result as _as_result)

__all__ = ["jit", "JitCacheInfo"]


class JitCacheInfo(NamedTuple):
    """Counters of a jitted function (``f.cache_info()``)."""
    hits: int          # calls answered by a replay
    misses: int        # calls that recorded (a new signature or a flipped guard)
    rerecords: int     # of the misses: recordings replaced after a guard flipped
    size: int          # recordings held now
    maxsize: int


class _Eager(Exception):
    """A call that must run eagerly (an argument traced by an outer transform)."""


def _leaf_key(x):
    """(key, traced) for one argument leaf: float leaves are traced (keyed by
    type, shape and dtype), everything else is static (keyed by value)."""
    t = type(x)
    if t is float:
        return float, True
    if t is np.ndarray:
        if x.dtype.kind == "f":
            return (x.shape, x.dtype), True
        return (x.shape, x.dtype.str, x.tobytes()), False
    if isinstance(x, Box):
        raise _Eager
    if isinstance(x, np.floating):
        return t, True
    try:
        hash(x)
    except TypeError:
        raise TypeError(
            f"jit: an argument leaf of type {t.__name__} is neither a float (array) "
            "nor hashable, so it can be neither traced nor part of the cache key; "
            "pass floats or numpy arrays, or make the value hashable (a tuple)") from None
    return _static_key(x), False


def _static_key(x):
    """A cache-key entry for a static value: its type and value, and for floats
    and complex numbers its repr too (-0.0 == 0.0, but a function may tell them
    apart, e.g. through copysign)."""
    if isinstance(x, (float, complex, np.inexact)):
        return type(x), x, repr(x)
    return type(x), x


def _structure_key(td):
    """A hashable encoding of a tree structure (preorder, iterative)."""
    if td.flat:
        return (td.kind, td.meta, len(td.children))
    out, stack = [], [td]
    while stack:
        t = stack.pop()
        meta = t.meta
        try:
            hash(meta)
        except TypeError:
            meta = repr(meta)
        out.append((t.kind, meta, len(t.children)))
        stack.extend(reversed(t.children))
    return tuple(out)


def _float_arrays(leaves):
    """Whether every leaf is a float ndarray with at least one dimension."""
    for x in leaves:
        if not (type(x) is np.ndarray and x.ndim and x.dtype.kind == "f"):
            return False
    return True


#: what ``_signature`` computes for a leaf array argument, once
_LEAF_TD = tree_flatten(np.zeros(1))[1]
_LEAF_KEY = _structure_key(_LEAF_TD)
_REAL_FLOATS = (np.dtype(np.float64), np.dtype(np.float32))
_F64 = np.float64


_LEAF_TDS = {}


def _leaf_tds(n):
    """The tree structures of n bare leaves (a tuple, made once per n)."""
    tds = _LEAF_TDS.get(n)
    if tds is None:
        tds = _LEAF_TDS[n] = (_LEAF_TD,) * n
    return tds


_DICT_TDS = {}


def _dict_td(keys):
    """The tree structure of a flat dict with these (sorted) keys, made once
    per key tuple, so a cache hit compares it by identity."""
    td = _DICT_TDS.get(keys)
    if td is None:
        if len(_DICT_TDS) >= 256:
            _DICT_TDS.clear()
        td = _DICT_TDS[keys] = TreeDef("dict", keys, (_LEAF_TD,) * len(keys), flat=True)
    return td


def _flat_signature(args):
    """(key, tree structures, leaves) of a call whose arguments are each a
    Python float, a np.float64, a float array or a flat dict of float arrays
    (a parameter dict), every leaf traced; None for any other call.  The key
    and structures are the ones ``_signature``'s general path makes for them
    (a differentiated 0-d array it makes a float shares the recording of a
    float)."""
    codes = []
    tds = None
    leaves = None
    for j, x in enumerate(args):
        t = type(x)
        if t is float or t is np.float64:
            codes.append(_LEAF_KEY)
            codes.append(t)
        elif t is np.ndarray and x.ndim and x.dtype in _REAL_FLOATS:
            codes.append(_LEAF_KEY)
            codes.append((x.shape, x.dtype))
        elif t is dict and x:
            try:
                keys = tuple(sorted(x))
            except TypeError:           # the general path says what is wrong
                return None
            if tds is None:
                tds, leaves = list(_leaf_tds(j)), list(args[:j])
            td = _dict_td(keys)
            tds.append(td)
            codes.append(("dict", keys, len(keys)))      # _structure_key(td)
            for k in keys:
                v = x[k]
                if not (type(v) is np.ndarray and v.ndim and v.dtype in _REAL_FLOATS):
                    return None
                codes.append((v.shape, v.dtype))
                leaves.append(v)
            continue
        else:
            return None
        if tds is not None:
            tds.append(_LEAF_TD)
            leaves.append(x)
    key = len(args), False, tuple(codes), ()
    if tds is None:
        return key, _leaf_tds(len(args)), list(args)
    return key, tuple(tds), leaves


class _Recorded:
    """One recording: its tape, where the inputs and outputs are on it, and a lock."""

    __slots__ = ("tape", "td", "out_td", "out_ids", "out_consts", "grad", "grad_ids",
                 "leaf_grad", "float_grad", "pooled", "lock")

    def __init__(self):
        self.lock = threading.Lock()
        self.leaf_grad = False
        self.float_grad = None
        self.pooled = True


class _Jitted:
    """The callable ``ta.jit`` returns (see :func:`jit`)."""

    def __init__(self, fun, static_argnums, cache_size):
        self.fun = fun
        tag = getattr(fun, "_tapead_grad", None)   # (f, argnums, has_aux, holo, kind, wrapper)
        self._grad = tag if tag is not None and tag[5] is fun else None
        self._static = static_argnums
        self._maxsize = cache_size
        self._cache = collections.OrderedDict()
        self._lock = threading.Lock()
        self._hits = self._misses = self._rerecords = 0
        self._grad_nums_by_n = {}
        functools.update_wrapper(self, fun)

    # -- the signature ---------------------------------------------------
    def _signature(self, args, kwargs):
        """(cache key, tree structures, leaves, positions of the traced leaves).

        Each non-static argument (and the keyword arguments together) is
        flattened on its own, so flat sequences take ``tree_flatten``'s fast
        path; ``tds`` holds their structures, compared on a cache hit."""
        if not kwargs and not self._static:
            flat = _flat_signature(args)
            if flat is not None:    # floats, float arrays, dicts of them: all traced
                self._grad_nums(len(args))          # refuses argnums out of range
                key, tds, leaves = flat
                return key, tds, leaves, range(len(leaves))
        static = self._normalised_static(len(args)) if self._static else ()
        grad_nums = self._grad_nums(len(args))
        leaves, tds, keys, traced = [], [], [], []
        parts = [args[i] for i in range(len(args)) if i not in static]
        if kwargs:
            parts.append(kwargs)
        dyn_pos = [i for i in range(len(args)) if i not in static]
        for k, part in enumerate(parts):
            ls, td = tree_flatten(part)
            scalars = td.all_float or td.all_f64    # every leaf a float / np.float64
            if k < len(dyn_pos) and dyn_pos[k] in grad_nums and not scalars and \
                    not _float_arrays(ls):      # float arrays pass check_leaf unchanged
                if any(isinstance(x, Box) for x in ls):
                    raise _Eager
                what = _Where("grad", dyn_pos[k])
                ls = [_check_leaf(x, what, self._grad[3]) for x in ls]
            base = len(leaves)
            if scalars:                         # every leaf a Python float, or a np.float64
                keys.append((_structure_key(td), len(ls), td.all_f64))
                if base == 0:                   # a long list of floats: no list of positions
                    traced = range(len(ls))
                else:
                    traced = list(traced)
                    traced.extend(range(base, base + len(ls)))
            else:
                keys.append(_structure_key(td))
                if type(traced) is range:
                    traced = list(traced)
                for j, x in enumerate(ls):
                    if type(x) is np.ndarray and x.dtype.kind == "f":
                        keys.append((x.shape, x.dtype))     # _leaf_key's, inline
                        traced.append(base + j)
                        continue
                    kx, tr = _leaf_key(x)
                    keys.append(kx)
                    if tr:
                        traced.append(base + j)
            if base == 0:
                leaves = ls                     # tree_flatten's list is new: ours to keep
            else:
                leaves.extend(ls)
            tds.append(td)
        statics = []
        for i in static:
            v = args[i]
            if isinstance(v, Box) or any(isinstance(x, Box) for x in tree_flatten(v)[0]):
                raise _Eager
            try:
                hash(v)
            except TypeError:
                raise TypeError(f"jit: static argument {i} (static_argnums) must be "
                                f"hashable, got a {type(v).__name__}; pass a tuple "
                                "instead of a list, or trace it (drop it from "
                                "static_argnums)") from None
            statics.append((i, _static_key(v)))
        key = (len(args), bool(kwargs), tuple(keys), tuple(statics))
        return key, tuple(tds), leaves, traced

    def _grad_nums(self, nargs):
        """The differentiated positions for a call with ``nargs`` arguments."""
        if self._grad is None:
            return ()
        nums = self._grad_nums_by_n.get(nargs)
        if nums is None:
            nums = self._grad_nums_by_n[nargs] = _argnums(self._grad[1], nargs)[0]
        return nums

    def _normalised_static(self, nargs):
        out = set()
        for i in self._static:
            if not -nargs <= i < nargs:
                raise ValueError(f"jit: static_argnums {i} is out of range for a call "
                                 f"with {nargs} positional arguments")
            out.add(i % nargs)
        return out

    # -- calls -------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        return self._call(args, kwargs)

    def _call(self, args, kwargs):
        try:
            key, td, leaves, traced = self._signature(args, kwargs)
        except _Eager:           # inside another transform: its tracers need eager code
            return self.fun(*args, **kwargs)
        with self._lock:
            rec = self._cache.get(key)
            if rec is not None and rec.td == td:
                if len(self._cache) > 1:
                    self._cache.move_to_end(key)
                self._hits += 1
            else:
                rec = None
        if rec is not None:
            values = leaves if len(traced) == len(leaves) else [leaves[j] for j in traced]
            with rec.lock:
                try:
                    if rec.pooled:       # arrays on the tape: they reuse the last call's memory
                        with _core.pooled():
                            return self._replay(rec, values, leaves, args)
                    return self._replay(rec, values, leaves, args)
                except (GuardFlippedError, TapeReplayError):
                    pass
            with self._lock:
                self._hits -= 1
                self._rerecords += 1
        with self._lock:
            self._misses += 1
        with _core.pooled():
            rec, result = self._record(args, kwargs, td, leaves, traced)
        if rec is not None:
            rec.pooled = rec.tape.n_object_nodes > 0
            with self._lock:
                self._cache[key] = rec
                self._cache.move_to_end(key)
                while len(self._cache) > self._maxsize:
                    self._cache.popitem(last=False)
        return result

    def _replay(self, rec, values, leaves, args):
        tape = rec.tape
        if rec.grad is None:
            vals = tape.evaluate(values, rec.out_ids)
            if vals is None:              # a leaf not exactly of its recorded kind
                tape.replay(values, partials=False)
                vals = [tape.value(i) if i >= 0 else None for i in rec.out_ids]
            return self._outputs(rec, vals)
        tape.replay(values)
        return self._grad_outputs(rec, tape, leaves, args)

    def _outputs(self, rec, vals):
        if rec.out_td.kind == "leaf" and rec.out_ids[0] >= 0:   # one traced output
            return _plain(vals[0])
        out = [_plain(v) if i >= 0 else c for v, i, c in
               zip(vals, rec.out_ids, rec.out_consts)]
        return tree_unflatten(rec.out_td, out)

    def _grad_outputs(self, rec, tape, leaves, args):
        out_id, value_const, diff_pos, in_trees, single, counts = rec.grad
        if rec.leaf_grad:     # one array differentiated, no aux: what _grads does, in short
            x = leaves[diff_pos[0]]
            a = tape.backward([out_id], [1.0], rec.grad_ids[0], dense=True)[0]
            if not (type(a) is np.ndarray and type(x) is np.ndarray and a.dtype == x.dtype
                    and a.shape == x.shape):
                a = _as_result(a, x)
            value = np.float64(tape.value(out_id))
            return (value, a) if self._grad[4] == "value_and_grad" else a
        if rec.float_grad is not None:     # bare float scalars differentiated, no aux
            adjs = tape.backward([out_id], [1.0], rec.float_grad)
            gs = [_F64(0.0) if a is None else _F64(a) for a in adjs
                  if a is None or type(a) is float]   # as as_result makes them
            if len(gs) == len(adjs):       # else (an object adjoint): the general path
                g = gs[0] if single else tuple(gs)
                value = _F64(tape.value(out_id))
                return (value, g) if self._grad[4] == "value_and_grad" else g
        if len(counts) == 1 and counts[0] == len(leaves):
            in_leaves = [leaves]        # one argument differentiated, all its leaves traced
        else:
            in_leaves, k = [], 0
            for n in counts:
                in_leaves.append([leaves[j] for j in diff_pos[k:k + n]])
                k += n
        in_ids = rec.grad_ids
        g = _grads(tape, [out_id] if out_id >= 0 else [], [1.0] if out_id >= 0 else [],
                   in_leaves, in_trees, in_ids, single)
        value = np.float64(tape.value(out_id)) if out_id >= 0 else value_const
        has_aux, kind = self._grad[2], self._grad[4]
        if has_aux:
            aux = tree_unflatten(rec.out_td, [_plain(tape.value(i)) if i >= 0 else c
                                              for i, c in zip(rec.out_ids, rec.out_consts)])
            return ((value, aux), g) if kind == "value_and_grad" else (g, aux)
        return (value, g) if kind == "value_and_grad" else g

    # -- recording -------------------------------------------------------
    def _record(self, args, kwargs, td, leaves, traced):
        """Run the function on a new tape; returns (recording or None, result)."""
        started = _core.traces_started()
        tape = Tape()
        boxed = list(leaves)
        try:
            tracers = tape.input_many([leaves[j] for j in traced])
            for j, t in zip(traced, tracers):
                boxed[j] = t
            parts, k = [], 0
            for t in td:
                n = t.num_leaves
                parts.append(tree_unflatten(t, boxed[k:k + n]))
                k += n
            kw = parts.pop() if kwargs else {}
            static = self._normalised_static(len(args))
            it = iter(parts)
            call_args = [args[i] if i in static else next(it) for i in range(len(args))]
            f = self.fun if self._grad is None else self._grad[0]
            out = _pack_outputs(f(*call_args, **kw))
        finally:
            tape.active = False
        if _core.traces_started() - started > 1:
            raise TapeReplayError(
                "jit: the function runs another transform inside (ta.grad, ta.jvp, "
                "ta.jacfwd, ta.vmap, ta.checkpoint, ...). That transform's derivative "
                "rules and branch checks saw the recorded input values and a replay "
                "cannot update them. Put jit outside a derivative (ta.jit(ta.grad(f)) is "
                "supported); a vmap is not recorded (call ta.vmap(f) without jit: it "
                "already runs each operation once for all lanes); or call the function "
                "without jit")
        if tape.values_read:
            raise TapeReplayError(
                "jit: the function reads the number inside a traced value (x.primal, "
                "x.value). Whatever Python computes from that number (a branch, a loop "
                "count, an index) would be frozen in the recording, and a replay at new "
                "inputs could not update it. Compare traced values directly (if x > 0: "
                "... is recorded as a guard), pass the number as a static argument "
                "(static_argnums=), or call the function without jit")
        rec = _Recorded()
        rec.tape, rec.td, rec.grad = tape, td, None
        if self._grad is None:
            if self._outputs_of(rec, out, tape):     # values of an enclosing transform
                return None, tree_unflatten(rec.out_td, [_plain(_unbox_out(x, tape)) for x
                                                         in tree_flatten(out)[0]])
            return rec, self._outputs_of_record(rec, tape, out)
        return self._finish_grad(rec, tape, out, args, kwargs, leaves, traced)

    def _outputs_of(self, rec, out, tape):
        """Fill rec's outputs from ``out``; True if an output carries values of
        another transform (the call must stay eager: nothing is cached)."""
        out_leaves, rec.out_td = tree_flatten(out)
        rec.out_ids, rec.out_consts = [], []
        eager = False
        for x in out_leaves:
            if type(x) is Tracer and x.tape is tape:
                if isinstance(x.primal, Box):
                    eager = True
                rec.out_ids.append(x.idx)
                rec.out_consts.append(None)
            else:
                if isinstance(x, Box):
                    eager = True
                rec.out_ids.append(-1)
                rec.out_consts.append(x)
        return eager

    def _outputs_of_record(self, rec, tape, out):
        return self._outputs(rec, [_core.concrete(x) if i >= 0 else None
                                   for x, i in zip(tree_flatten(out)[0], rec.out_ids)])

    def _finish_grad(self, rec, tape, out, args, kwargs, leaves, traced):
        f, argnums, has_aux, holomorphic, kind, _ = self._grad
        if holomorphic:
            raise TapeReplayError("jit: a holomorphic gradient (holomorphic=True) cannot "
                                  "be replayed; call it without jit")
        if has_aux:
            out, aux = _split_aux(out, kind)
        _check_scalar_output(out, kind, has_aux)
        if _core.is_complex(out):
            _check_kinds(kind, False, outs=[out])
        # which traced leaves are the differentiated ones, and their trees
        nums, single = _argnums(argnums, len(args))
        static = self._normalised_static(len(args))
        dpos = [i for i in range(len(args)) if i not in static]
        for i in nums:
            if i in static:
                raise ValueError(f"jit: argument {i} is differentiated (argnums) and "
                                 "static (static_argnums); it cannot be both")
        # leaves are laid out as (dyn args in order, kwargs); find each dyn arg's span
        spans, k = {}, 0
        for i in dpos:
            n = tree_flatten(args[i])[1].num_leaves
            spans[i] = (k, k + n)
            k += n
        traced_index = {j: t for t, j in enumerate(traced)}
        in_trees, diff_pos, ids = [], [], []
        for i in nums:
            lo, hi = spans[i]
            in_trees.append(tree_flatten(args[i])[1])
            ids.append([])
            for j in range(lo, hi):
                if j not in traced_index:     # _check_leaf made every one a float
                    raise TapeReplayError("jit: an argument to differentiate is not traced")
                diff_pos.append(j)
                ids[-1].append(tape.inputs[traced_index[j]])
        # consecutive input nodes (a list of floats): a range, which the sweep
        # checks and gathers from in one step instead of id by id
        rec.grad_ids = [range(g[0], g[0] + len(g)) if g and g == list(range(g[0], g[0] + len(g)))
                        else g for g in ids]
        wanted = {i for g in ids for i in g}
        # the traced data not differentiated (a batch, targets): loaded on each
        # replay, but the sweep need not compute their adjoints
        tape.skip_adjoints([i for i in tape.inputs if i not in wanted])
        out_id = out.idx if (type(out) is Tracer and out.tape is tape) else -1
        if has_aux:
            eager = self._outputs_of(rec, aux, tape)
        else:
            rec.out_td, rec.out_ids, rec.out_consts, eager = None, [], [], False
        if isinstance(out.primal if out_id >= 0 else out, Box):
            eager = True
        if eager:          # values of an enclosing transform: run the gradient eagerly
            return None, self.fun(*args, **kwargs)
        rec.grad = (out_id, None if out_id >= 0 else _plain(out), diff_pos, in_trees, single,
                    [len(x) for x in ids])
        rec.leaf_grad = (out_id >= 0 and single and not has_aux and len(ids[0]) == 1
                         and in_trees[0].kind == "leaf"
                         and type(leaves[diff_pos[0]]) is np.ndarray)
        if out_id >= 0 and not has_aux and all(
                len(g) == 1 and t.kind == "leaf" for g, t in zip(ids, in_trees)) and all(
                type(leaves[j]) is float or type(leaves[j]) is np.float64 for j in diff_pos):
            rec.float_grad = [g[0] for g in ids]
        return rec, self._grad_outputs(rec, tape, leaves, args)

    # -- introspection ------------------------------------------------------
    def cache_info(self) -> JitCacheInfo:
        """Hits, misses, re-recordings and the size of the recording cache."""
        with self._lock:
            return JitCacheInfo(self._hits, self._misses, self._rerecords,
                                len(self._cache), self._maxsize)

    def clear_cache(self) -> None:
        """Drop every recording (the next call records again)."""
        with self._lock:
            self._cache.clear()

    def __repr__(self):
        return f"<jitted {getattr(self.fun, '__name__', 'function')}>"


def jit(fun: Callable, static_argnums: Union[int, Sequence[int]] = (),
        cache_size: int = 64) -> Callable:
    """Record ``fun`` once per input signature and replay its tape in C.

    The first call with a new signature runs ``fun`` in Python on a tape (its
    value is returned as usual); later calls with the same signature
    re-evaluate the recorded tape at the new values without running Python.
    The signature is the pytree structure of the arguments, the shape and
    dtype of each float array, the type of each float scalar, and the value
    of every other leaf (ints, bools, strings, integer arrays, ...) and of the
    arguments named in ``static_argnums``.  A replay at inputs where a
    recorded Python branch goes the other way (or an array changes shape)
    records ``fun`` again there.  ``ta.jit(ta.grad(f))`` and
    ``ta.jit(ta.value_and_grad(f))`` replay ``f``'s tape and run one reverse
    sweep.  Unlike ``jax.jit`` there is no compile step, and Python side
    effects (printing, appending to lists, random numbers drawn in Python)
    happen only when ``fun`` is recorded.

    Parameters
    ----------
    fun : callable
        Takes floats, float arrays, pytrees of them and static values;
        returns an array, a scalar or a pytree of them.  It must not run
        another transform inside (``ta.grad``, ``ta.jvp``, ...): that raises
        ``TapeReplayError`` at the first call.
    static_argnums : int or sequence of int
        Positional arguments that are part of the signature by value (not
        traced); they must be hashable.
    cache_size : int
        Recordings kept (least recently used ones are dropped).

    Returns
    -------
    callable
        Same arguments and results as ``fun``; ``.cache_info()`` counts the
        replays (hits) and recordings (misses), ``.clear_cache()`` drops the
        recordings.  Calls from several threads are safe (one lock per
        recording).  Called with values traced by another transform (inside
        ``ta.grad``, ...), it runs ``fun`` eagerly.

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> f = ta.jit(lambda x, y: np.sin(x) * y)
    >>> print(f(np.array([0.0, 1.0]), 2.0))        # recorded
    [0.         1.68294197]
    >>> print(f(np.array([0.5, 2.0]), 1.0))        # replayed
    [0.47942554 0.90929743]
    >>> g = ta.jit(ta.grad(lambda x: (x ** 3).sum()))
    >>> print(g(np.array([1.0, 2.0])), g(np.array([3.0, 4.0])))
    [ 3. 12.] [27. 48.]
    >>> g.cache_info().hits
    1
    """
    if not callable(fun):
        raise TypeError(f"jit: expected a function, got a {type(fun).__name__}")
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    static_argnums = tuple(static_argnums)
    if not all(isinstance(i, int) for i in static_argnums):
        raise TypeError("jit: static_argnums must be an int or a sequence of ints")
    if not (isinstance(cache_size, int) and cache_size >= 1):
        raise ValueError(f"jit: cache_size must be a positive int, got {cache_size!r}")
    return _Jitted(fun, static_argnums, cache_size)
