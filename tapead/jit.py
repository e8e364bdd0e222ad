"""``ta.jit``: record a function once per input signature, replay its tape in C.

The first call with a given signature (the pytree structure of the
arguments, the shapes and dtypes of their float leaves, the types of Python
scalars, the values of everything else) runs the Python function once on a
fresh tape; later calls with that signature re-evaluate the recorded tape at
the new values (``Tape.evaluate`` / ``Tape.replay``) without running Python.
A replay whose recorded branch no longer holds (``GuardFlippedError``) or
whose array shapes change (``TapeReplayError``) records the function again at
those inputs.

The function may run transforms inside (``ta.jit(ta.grad(f))``,
``ta.jit(ta.hvp(...))``, a ``ta.vmap`` or a loop in the body): the recording
is a :class:`tapead.program.Program` that holds what they did -- their
reverse and forward sweeps are operations on it like any other -- so a replay
evaluates the derivative at the new inputs.  ``ta.record`` is a one-entry
``ta.jit`` that raises instead of recording again.
"""
from __future__ import annotations

import collections
import copyreg
import functools
import os
import threading
import uuid
import weakref
from typing import Callable, NamedTuple, Sequence, Union

import numpy as np

from tapead import _core
from tapead._core import Box
from tapead._tree import TreeDef, tree_flatten, tree_unflatten
from tapead.errors import GuardFlippedError, NonScalarOutputError, ShapeError, TapeReplayError
from tapead.boxing import check_leaf as _check_leaf, plain as _plain
from tapead.program import Derivative, Program
from tapead.compiler import runs
from tapead.compiler.compiled import Compilation
from tapead.transforms import value_and_grad

__all__ = ["jit", "JitCacheInfo", "record", "Recording"]


class JitCacheInfo(NamedTuple):
    """Counters of a jitted function (``f.cache_info()``)."""
    hits: int          # calls answered by a replay
    misses: int        # calls that recorded (a new signature or a flipped guard)
    rerecords: int     # of the misses: recordings replaced after a guard flipped
    size: int          # recordings held now
    maxsize: int
    compiled: int = 0             # of the recordings held: running native kernels
    compile_seconds: float = 0.0  # spent compiling them (0 when loaded from the disk cache)


class _Eager(Exception):
    """A call that must run eagerly (an argument traced by an outer transform)."""


def _leaf_key(x):
    """(key, traced) for one argument leaf: float and complex leaves are traced
    (keyed by type, shape and dtype), everything else is static (keyed by
    value)."""
    t = type(x)
    if t is float or t is complex:
        return t, True
    if t is np.ndarray:
        if x.dtype.kind in "fc":
            return (x.shape, x.dtype), True
        return (x.shape, x.dtype.str, x.tobytes()), False
    if isinstance(x, Box):
        raise _Eager
    if isinstance(x, np.inexact):
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
    """One recording: its program, where the outputs are on it, and a lock."""

    __slots__ = ("program", "td", "out_td", "out_ids", "out_consts", "scalar_outs", "pooled",
                 "lock", "compiled")

    def __init__(self, program, td):
        self.program, self.td = program, td
        self.lock = threading.Lock()
        self.compiled = None            # a compiler.compiled.Compilation, when fused
        self.pooled = program.tape.n_object_nodes > 0


class _Jitted:
    """The callable ``ta.jit`` returns (see :func:`jit`)."""

    def __init__(self, fun, static_argnums, cache_size, rerecord=True, fuse=True,
                 native=True, strict=False):
        self.fun = fun
        self._fuse = fuse
        self._native, self._strict = native, strict
        self._static = static_argnums
        self._maxsize = cache_size
        self._rerecord = rerecord
        self._cache = collections.OrderedDict()
        self._lock = threading.Lock()
        self._hits = self._misses = self._rerecords = 0
        self._token = None
        functools.update_wrapper(self, fun)

    def __reduce__(self):
        """Pickle as (function, options, token): unpickling in a process returns
        the one ``_Jitted`` that process holds for the token, so the tasks a
        worker runs share its recordings (see :func:`_shared`)."""
        return (_unpickle_jitted, (_token_of(self), self.fun, self._static, self._maxsize,
                                   self._rerecord, self._fuse, self._native, self._strict))

    # -- the signature ---------------------------------------------------
    def _signature(self, args, kwargs):
        """(cache key, tree structures, leaves, positions of the traced leaves).

        Each non-static argument (and the keyword arguments together) is
        flattened on its own, so flat sequences take ``tree_flatten``'s fast
        path; ``tds`` holds their structures, compared on a cache hit."""
        if not kwargs and not self._static:
            flat = _flat_signature(args)
            if flat is not None:    # floats, float arrays, dicts of them: all traced
                key, tds, leaves = flat
                return key, tds, leaves, range(len(leaves))
        static = self._normalised_static(len(args)) if self._static else ()
        leaves, tds, keys, traced = [], [], [], []
        parts = [args[i] for i in range(len(args)) if i not in static]
        if kwargs:
            parts.append(kwargs)
        for part in parts:
            ls, td = tree_flatten(part)
            scalars = td.all_float or td.all_f64    # every leaf a float / np.float64
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
                    if type(x) is np.ndarray and x.dtype.kind in "fc":
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
                            out = self._outputs(rec, rec.program.evaluate(values, rec.out_ids))
                    else:
                        out = self._outputs(rec, rec.program.evaluate(values, rec.out_ids))
                    if rec.compiled is not None:
                        rec.compiled.replayed()     # native kernels after the first replays
                    return out
                except (GuardFlippedError, TapeReplayError):
                    if not self._rerecord:
                        raise
            with self._lock:
                self._hits -= 1
                self._rerecords += 1
        with self._lock:
            self._misses += 1
        with _core.pooled():
            rec, result = self._record(args, kwargs, td, leaves, traced)
        if rec is not None:
            with self._lock:
                self._cache[key] = rec
                self._cache.move_to_end(key)
                while len(self._cache) > self._maxsize:
                    self._cache.popitem(last=False)
        return result

    def _outputs(self, rec, vals):
        if rec.out_td.kind == "leaf" and rec.out_ids[0] >= 0:   # one traced output
            return _plain(vals[0])
        if rec.scalar_outs:      # every output a scalar node: numpy scalars in one step
            return tree_unflatten(rec.out_td, list(np.array(vals, dtype=np.float64)))
        out = [_plain(v) if i >= 0 else c for v, i, c in
               zip(vals, rec.out_ids, rec.out_consts)]
        return tree_unflatten(rec.out_td, out)

    # -- recording -------------------------------------------------------
    def _record(self, args, kwargs, td, leaves, traced):
        """Run the function on a new tape; returns (recording or None, result)."""
        static = self._normalised_static(len(args))

        def call(boxed):
            parts, k = [], 0
            for t in td:
                n = t.num_leaves
                parts.append(tree_unflatten(t, boxed[k:k + n]))
                k += n
            kw = parts.pop() if kwargs else {}
            it = iter(parts)
            return self.fun(*[args[i] if i in static else next(it) for i in range(len(args))],
                            **kw)
        program = Program.record_replayable(call, leaves, traced)
        tape, out = program.tape, program.out
        if tape.values_read:
            raise TapeReplayError(
                "jit: the function reads the number inside a traced value (x.primal, "
                "x.value). Whatever Python computes from that number (a branch, a loop "
                "count, an index) would be frozen in the recording, and a replay at new "
                "inputs could not update it. Compare traced values directly (if x > 0: "
                "... is recorded as a guard), pass the number as a static argument "
                "(static_argnums=), or call the function without jit")
        rec = _Recorded(program, td)
        out_leaves, rec.out_td = tree_flatten(out)
        rec.out_ids, rec.out_consts = [], []
        eager = False
        for x in out_leaves:
            i = program.node_of(x)
            if isinstance(x.primal if i >= 0 else x, Box):
                eager = True          # a value of an enclosing transform: nothing to cache
            rec.out_ids.append(i)
            rec.out_consts.append(None if i >= 0 else x)
        rec.scalar_outs = len(out_leaves) > 1 and all(
            i >= 0 and tape.is_scalar_node(i) for i in rec.out_ids)
        result = tree_unflatten(rec.out_td, [_plain(x.primal) if i >= 0 else x
                                             for x, i in zip(out_leaves, rec.out_ids)])
        if not eager and self._fuse and _fusion_on() and (
                tape.n_object_nodes > 1 or tape.n_nodes >= runs.MIN_RUN):
            # elementwise chains in one pass each, unused nodes skipped (values only);
            # native kernels for them after the first replays
            rec.compiled = Compilation(tape, [i for i in rec.out_ids if i >= 0], rec.lock,
                                       native=self._native, strict=self._strict)
        return (None if eager else rec), result

    def _recording(self, args, kwargs):
        """The recording for these arguments (recorded now if new)."""
        key, td, leaves, traced = self._signature(args, kwargs)
        with self._lock:
            rec = self._cache.get(key)
        if rec is None or rec.td != td:
            self._call(args, kwargs)
            with self._lock:
                rec = self._cache.get(key)
        if rec is None:
            raise TapeReplayError("jit: this call is not recorded (it ran eagerly: an argument "
                                  "is traced by an enclosing transform)")
        return rec

    def lower(self, *args, **kwargs) -> str:
        """The C source of the native kernels for this signature (recorded
        now if new), with a header of what the recording's replays fuse."""
        rec = self._recording(args, kwargs)
        if rec.compiled is None:
            return "/* nothing fused: the replay runs node by node */\n"
        body = rec.compiled.source()
        head = "\n".join(" * " + line for line in rec.compiled.describe().splitlines())
        return f"/*\n{head}\n */\n{body}"

    def compile(self, *args, **kwargs):
        """Compile this signature's native kernels now (recorded first if new)
        and wait for them; returns the recording's ``Compilation``
        (``.is_native``, ``.seconds``, ``.describe()``).  With ``strict=True``
        a part that cannot be compiled raises ``NativeCompileError``."""
        rec = self._recording(args, kwargs)
        if rec.compiled is None:
            return None
        return rec.compiled.compile()

    # -- introspection ------------------------------------------------------
    def cache_info(self) -> JitCacheInfo:
        """Hits, misses, re-recordings and the size of the recording cache."""
        with self._lock:
            comps = [r.compiled for r in self._cache.values() if r.compiled is not None]
            return JitCacheInfo(self._hits, self._misses, self._rerecords,
                                len(self._cache), self._maxsize,
                                sum(c.is_native for c in comps),
                                float(sum(c.compile_seconds for c in comps)))

    def clear_cache(self) -> None:
        """Drop every recording (the next call records again)."""
        with self._lock:
            self._cache.clear()

    def __repr__(self):
        return f"<jitted {getattr(self.fun, '__name__', 'function')}>"


def _fusion_on() -> bool:
    """``TAPEAD_FUSION=0`` turns the fusion of replays off (every node replayed
    on its own, as recorded)."""
    return os.environ.get("TAPEAD_FUSION", "1") not in ("0", "")


def jit(fun: Callable, static_argnums: Union[int, Sequence[int]] = (),
        cache_size: int = 64, fuse: bool = True, native: bool = True,
        strict: bool = False) -> Callable:
    """Record ``fun`` once per input signature and replay its tape in C.

    The first call with a new signature runs ``fun`` in Python on a tape (its
    value is returned as usual); later calls with the same signature
    re-evaluate the recorded tape at the new values without running Python.
    The signature is the pytree structure of the arguments, the shape and
    dtype of each float array, the type of each float scalar, and the value
    of every other leaf (ints, bools, strings, integer arrays, ...) and of the
    arguments named in ``static_argnums``.  A replay at inputs where a
    recorded Python branch goes the other way (or an array changes shape)
    records ``fun`` again there.  ``fun`` may be (or call) another transform:
    ``ta.jit(ta.grad(f))``, ``ta.jit(ta.hvp(...))``, ``ta.jit(ta.jacfwd(f))``
    record the derivative computation itself and replay it.  Unlike
    ``jax.jit`` there is no compile step, and Python side effects (printing,
    appending to lists, random numbers drawn in Python) happen only when
    ``fun`` is recorded.

    Parameters
    ----------
    fun : callable
        Takes floats, float arrays, pytrees of them and static values;
        returns an array, a scalar or a pytree of them.  It may run other
        transforms inside.  Reading the number inside a traced value
        (``x.primal``) raises ``TapeReplayError`` at the first call.
    static_argnums : int or sequence of int
        Positional arguments that are part of the signature by value (not
        traced); they must be hashable.
    cache_size : int
        Recordings kept (least recently used ones are dropped).
    fuse : bool
        Replay chains of elementwise float64 array operations as one blocked
        pass each (numpy's own loops, the same bits; intermediates only the
        next operation reads are never whole arrays), and skip nodes no
        output needs.  ``False`` (or the environment variable
        ``TAPEAD_FUSION=0``) replays every node as recorded.
    native : bool
        After a signature's first replays, compile its fused groups into
        native code in a background thread (C generated from the groups,
        built by the system C compiler, cached on disk): one loop per group,
        with full sums and the sine and cosine of one argument taken into
        it.  The values stay numpy's bits.  Without a C compiler, or with
        ``False`` (or ``TAPEAD_NATIVE=0``), groups keep numpy's loops.
        ``f.compile(*args)`` compiles at once; ``f.lower(*args)`` shows the C.
    strict : bool
        ``f.compile(...)`` raises ``tapead.errors.NativeCompileError`` (naming the
        operations) when a fused group cannot get native code, instead of
        keeping numpy's loops for it.

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
    return _Jitted(fun, static_argnums, cache_size, fuse=bool(fuse), native=bool(native),
                   strict=bool(strict))


class Recording:
    """A function recorded once, evaluable at new inputs: a one-entry ``ta.jit``.

    Made by :func:`record`.  Calling it re-evaluates the recorded tape at new
    inputs of the same structure and shapes without running Python; where a
    recorded branch goes the other way it raises ``GuardFlippedError`` (it
    does not record again).

    Attributes
    ----------
    tape : Tape
        The recorded tape (``tape.n_nodes``, ``tape.nbytes``,
        ``tape.memory()``).
    n_nodes : int
        Number of nodes on the tape.
    nbytes : int
        Bytes of values the tape holds.

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> rec = ta.record(lambda x: (x * x).sum(), np.array([1.0, 2.0]))
    >>> print(rec(np.array([3.0, 4.0])))
    25.0
    >>> value, g = rec.value_and_grad(np.array([3.0, 4.0]))
    >>> print(value, g)
    25.0 [6. 8.]
    """

    def __init__(self, f, args):
        self.f = f
        self._n_args = len(args)
        self._trees = [tree_flatten(a)[1] for a in args]
        args = self._checked(args)
        self._token = None
        self._args = tuple(args)      # pickled with the recording, to record it again elsewhere
        self._value = _Jitted(f, (), 1, rerecord=False)
        out = self._value(*args)
        rec = next(iter(self._value._cache.values()), None)
        if rec is None:
            raise TapeReplayError("record: the function's output holds values of an "
                                  "enclosing transform; call it directly instead")
        if rec.out_td.kind != "leaf" or np.shape(out) != ():
            raise NonScalarOutputError("record: the function must return a scalar")
        if rec.out_ids[0] < 0:
            raise TypeError("record: the function's output does not depend on its "
                            "inputs; nothing to record")
        self.tape = rec.program.tape
        self._key = self._value._signature(tuple(args), {})[0]
        self._grad = _Jitted(value_and_grad(f, tuple(range(len(args))) if len(args) != 1
                                            else 0), (), 1, rerecord=False)
        self._grad(*args)          # recorded here, at the point the value was

    def _checked(self, args):
        if len(args) != self._n_args:
            raise TypeError(f"the recording takes {self._n_args} arguments, got {len(args)}")
        out = []
        for a, td in zip(args, self._trees):
            leaves, t2 = tree_flatten(a)
            if t2 != td:
                raise ShapeError("the arguments' structure differs from the recording's")
            out.append(tree_unflatten(td, [_check_leaf(x, "record") for x in leaves]))
        key = getattr(self, "_key", None)
        if key is not None and self._value._signature(tuple(out), {})[0] != key:
            raise TapeReplayError(
                "record: the inputs' shapes or types differ from the ones recorded; "
                "re-record the function at these inputs (ta.record), or use ta.jit, "
                "which records each new signature")
        return out

    def __reduce__(self):
        """Pickle as the function and the arguments it was recorded at (as
        they are when pickled: arrays are not copied at recording); a process
        unpickling it records it there once (one ``Recording`` per token and
        process, see :func:`_shared`)."""
        return (_unpickle_recording, (_token_of(self), self.f, self._args))

    @property
    def n_nodes(self) -> int:
        """Number of nodes on the recorded tape (inputs included)."""
        return self.tape.n_nodes

    @property
    def nbytes(self) -> int:
        """Bytes of values the tape keeps (``tape.memory()["values"]``)."""
        return self.tape.nbytes

    def __call__(self, *args):
        """The value at new inputs (replay, no Python tracing).  Calls from
        several threads take turns (the tape holds one point at a time)."""
        return np.float64(self._value(*self._checked(args)))

    def value_and_grad(self, *args):
        """``(value, grads)`` at new inputs: the recorded gradient program,
        evaluated there."""
        value, g = self._grad(*self._checked(args))
        return np.float64(value), g


# -- pickling: one object per token and process ---------------------------------
# A pickled ``ta.jit`` function or ``Recording`` carries a token, made when it is
# first pickled.  Unpickling looks the token up here: the process's object for
# it is returned (in the process that made it, the original), so the tasks a
# worker runs share one recording cache instead of recording each time.  The
# registry holds its objects weakly; the most recently unpickled ones are also
# held strongly, so an object survives between two tasks that unpickle it.
_SHARED: "weakref.WeakValueDictionary[str, object]" = weakref.WeakValueDictionary()
_RECENT: "collections.OrderedDict[str, object]" = collections.OrderedDict()
_RECENT_SIZE = 64
_SHARED_LOCK = threading.RLock()


def _token_of(obj) -> str:
    with _SHARED_LOCK:
        if obj._token is None:
            obj._token = uuid.uuid4().hex
            _SHARED[obj._token] = obj
        return obj._token


def _shared(token: str, make: Callable):
    """The process's object for ``token``, made by ``make()`` the first time."""
    with _SHARED_LOCK:
        obj = _SHARED.get(token)
        if obj is None:
            obj = make()
            obj._token = token
            _SHARED[token] = obj
        if obj is not _RECENT.get(token):
            _RECENT[token] = obj
        _RECENT.move_to_end(token)
        while len(_RECENT) > _RECENT_SIZE:
            _RECENT.popitem(last=False)
        return obj


def _unpickle_jitted(token, fun, static_argnums, cache_size, rerecord, fuse, native=True,
                     strict=False):
    return _shared(token, lambda: _Jitted(fun, static_argnums, cache_size, rerecord, fuse,
                                          native, strict))


def _unpickle_recording(token, f, args):
    return _shared(token, lambda: Recording(f, args))


# A function made by ta.grad (value_and_grad, jacfwd, jacrev) carries a
# ``Derivative`` holding a weak reference to that function, which does not
# pickle; it pickles as the function itself, referenced again on unpickling.
def _reduce_derivative(d):
    return _derivative_again, (d.kind, d.fun, d.argnums, d.has_aux, d.holomorphic,
                               d.wrapper())


def _dead():
    return None


def _derivative_again(kind, fun, argnums, has_aux, holomorphic, wrapper):
    ref = weakref.ref(wrapper) if wrapper is not None else _dead
    return Derivative(kind, fun, argnums, has_aux, holomorphic, ref)


copyreg.pickle(Derivative, _reduce_derivative)


def record(f: Callable, *args) -> Recording:
    """Record ``f`` at ``args`` into a tape that can be re-evaluated.

    Comparisons on traced values are recorded as guards; a re-evaluation
    whose guard flips raises ``GuardFlippedError`` instead of returning the
    derivative of the wrong branch (``ta.jit`` records again instead).

    Parameters
    ----------
    f : callable
        A scalar function of ``args``.
    *args
        The inputs to record at (floats, float arrays, pytrees).

    Returns
    -------
    Recording
        Callable at new inputs of the same structure and shapes;
        ``.value_and_grad(*args)`` gives the gradient there too.

    Examples
    --------
    >>> import tapead as ta
    >>> rec = ta.record(lambda x: x * x if x > 0 else -x, 2.0)
    >>> print(rec.value_and_grad(3.0))
    (np.float64(9.0), np.float64(6.0))
    >>> rec(-1.0)
    Traceback (most recent call last):
    ...
    tapead.errors.GuardFlippedError: ...
    """
    return Recording(f, args)

