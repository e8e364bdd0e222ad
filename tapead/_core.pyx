# cython: language_level=3
"""tapead._core -- the Wengert tape, the tracer types and the sweeps.

Layer 0 of tapead: it knows opcodes, nodes and traces, not user APIs.

* ``Tape`` is a flat, append-only list of nodes stored as a struct of C
  arrays (see ``docs/architecture.md`` for the byte layout).  Scalar nodes
  keep their value and local partials unboxed; everything else ("object
  nodes": arrays, nested values, Python-ruled primitives) keeps a
  ``Record`` in a Python list.
* ``Tracer`` (reverse mode) and ``Dual`` (forward mode) are the boxes user
  code computes with.  Scalar arithmetic on them runs in C through the one
  kernel ``scalar_eval``; everything else goes through ``bind``, which finds
  the innermost transform among the arguments (by level), lets the lower
  levels compute the value, and asks that transform to record or to push a
  tangent.
* ``Tape.backward`` is the reverse sweep: one loop over node ids, downwards,
  each node once, adjoints accumulated with ``+=``.  Tapes made only of
  scalar nodes are swept without the GIL.
* ``Tape.forward_sweep`` carries K tangent directions through a recorded
  tape at once; ``Tape.replay`` re-evaluates a tape at new inputs, checking
  the recorded guards.
"""
cimport cython
from libc.stdlib cimport malloc, calloc, realloc, free
from libc.string cimport memcpy, memset
from libc.stdint cimport int32_t, int64_t, uint64_t

import numpy as np
cimport numpy as cnp

cnp.import_array()
cdef object _NP_F64 = np.float64      # the scalar type list(array) gives

from tapead.errors import (BatchConcreteRead, BatchSplit, GuardFlippedError,
                           LeakedTracerError, MissingRuleError, NonDifferentiableError,
                           TapeReplayError)

include "_core_kernel.pxi"

# --------------------------------------------------------------------------
# transform levels
# --------------------------------------------------------------------------

cdef int _next_level = 0
import threading as _threading
_per_thread = _threading.local()     # transforms started by each thread


cdef class Trace:
    """A running transform (a tape or a forward trace) with its level.

    Levels increase with every transform started, so an inner (nested)
    transform always has a higher level than the ones around it.  A box
    whose trace is not the innermost one among an operation's arguments is
    a constant for that operation: this is what prevents perturbation
    confusion.
    """
    cdef readonly int level
    cdef public bint active

    def __cinit__(self, *args, **kwargs):
        global _next_level
        _next_level += 1
        self.level = _next_level
        _per_thread.started = getattr(_per_thread, "started", 0) + 1
        self.active = True


def traces_started():
    """How many transforms (tapes and forward traces) this thread started so far.

    A difference of two readings counts the transforms the thread ran in
    between, e.g. the ones nested inside a function being recorded (other
    threads' transforms do not count).
    """
    return getattr(_per_thread, "started", 0)


# --------------------------------------------------------------------------
# records of object nodes
# --------------------------------------------------------------------------

@cython.freelist(256)
@cython.final
cdef class Record:
    """What an object node keeps.

    Attributes
    ----------
    prim : Primitive or None
        The primitive applied (None for an input leaf).
    parents : tuple of int
        Node id of each positional argument, -1 where it was a constant.
    consts : tuple
        The constant arguments (None where a parent node stands), for replay.
    params : dict
        Keyword parameters of the primitive.
    saved : tuple
        Argument values the VJP needs (None where not needed).
    ans : object
        The node's value.
    """
    cdef public object prim
    cdef public tuple parents
    cdef public tuple consts
    cdef public dict params
    cdef public tuple saved
    cdef public object ans
    cdef public object info


# --------------------------------------------------------------------------
# boxes
# --------------------------------------------------------------------------

cdef dict _BINARY_PRIMS = {}          # opcode -> Primitive (set by tapead._prims)
cdef dict _UNARY_PRIMS = {}
cdef dict _NO_PARAMS = {}             # shared, never mutated
cdef object _box_methods = None       # name -> function(box, *args, **kw)


cdef object _MATMUL_PRIM = None
cdef frozenset _NUMPY_PROBES = frozenset(["__array_interface__", "__array_struct__"])


def install_generic(binary_prims, unary_prims, methods):
    """Install the primitives of the scalar opcodes and the Python-level box
    methods (called once by ``tapead._prims``)."""
    global _BINARY_PRIMS, _UNARY_PRIMS, _box_methods, _MATMUL_PRIM, _STACK_PRIM
    _BINARY_PRIMS = dict(binary_prims)
    _STACK_PRIM = methods.get("stack_prim")
    _UNARY_PRIMS = dict(unary_prims)
    _box_methods = methods
    _MATMUL_PRIM = methods.get("matmul_prim")


cdef object matmul_boxes(object x, object y):
    """``x @ y`` with a box on either side: straight to the primitive when both
    operands are arrays of at least one dimension, else the Python wrapper
    (which explains 0-d operands)."""
    cdef object xv = x, yv = y
    if type(x) is Batched or type(y) is Batched:
        return _box_methods["matmul"](x, y)
    while isinstance(xv, Box):
        if type(xv) is Batched:
            return _box_methods["matmul"](x, y)
        xv = primal_of(xv)
    while isinstance(yv, Box):
        if type(yv) is Batched:
            return _box_methods["matmul"](x, y)
        yv = primal_of(yv)
    if _MATMUL_PRIM is not None and type(xv) is np.ndarray and type(yv) is np.ndarray \
            and arr_ndim(xv) >= 1 and arr_ndim(yv) >= 1:
        return _bind(_MATMUL_PRIM, (x, y), _NO_PARAMS)
    return _box_methods["matmul"](x, y)


include "_core_boxes.pxi"

#: ``isinstance(x, Box)``: is x a traced value (of any transform)?
Box = (Tracer, Dual, Batched)


cdef inline Tracer new_tracer(Tape tape, Py_ssize_t idx, double dval, object oval):
    cdef Tracer t = Tracer.__new__(Tracer)
    t.tape = tape
    t.idx = idx
    t.dval = dval
    t.oval = oval
    return t


cdef inline Dual new_dual(ForwardTrace trace, double dp, double dt, object op, object ot):
    cdef Dual d = Dual.__new__(Dual)
    d.ftrace = trace
    d.dp = dp
    d.dt = dt
    d.op = op
    d.ot = ot
    return d


cdef inline bint is_fast_number(object x):
    # Python floats (and numpy float64, a float subclass) and ints, not bools
    return isinstance(x, float) or (type(x) is int)


cdef inline object binary(int op, object x, object y):
    """Apply binary opcode ``op``; C fast paths for unboxed scalars."""
    r = binary_scalar(op, x, y)
    if r is not None:
        return r
    r = small_binary(op, x, y)          # small float64 vectors: per element, in C
    if r is not None:
        return r
    return _bind(_BINARY_PRIMS[op], (x, y), _NO_PARAMS)


cdef inline object binary_scalar(int op, object x, object y):
    """Binary opcode ``op`` on unboxed scalars of one trace (or one and a
    number) as a scalar node or dual, in C; None for anything else."""
    cdef Tracer tx, ty
    cdef Dual dx, dy
    cdef double v, d0, d1
    if type(x) is Tracer:
        tx = <Tracer>x
        if tx.oval is None and tx.tape.active:
            if type(y) is Tracer:
                ty = <Tracer>y
                if ty.tape is tx.tape and ty.oval is None:
                    scalar_eval(op, tx.dval, ty.dval, &v, &d0, &d1)
                    return tx.tape.push_scalar(op, tx.idx, ty.idx, v, d0, d1)
            elif is_fast_number(y) and op < OP_MAXIMUM:
                if op == OP_ADD: op = OP_ADDC
                elif op == OP_MUL: op = OP_MULC
                elif op == OP_SUB: op = OP_SUBC
                elif op == OP_DIV: op = OP_DIVC
                else: op = OP_POWC
                scalar_eval(op, tx.dval, <double>y, &v, &d0, &d1)
                return tx.tape.push_scalar(op, tx.idx, -1, v, d0, d1)
    elif type(y) is Tracer:
        ty = <Tracer>y
        if ty.oval is None and ty.tape.active and is_fast_number(x) and op < OP_MAXIMUM:
            if op == OP_ADD: op = OP_ADDC
            elif op == OP_MUL: op = OP_MULC
            elif op == OP_SUB: op = OP_RSUBC
            elif op == OP_DIV: op = OP_RDIVC
            else: op = OP_RPOWC
            scalar_eval(op, ty.dval, <double>x, &v, &d0, &d1)
            return ty.tape.push_scalar(op, ty.idx, -1, v, d0, d1)
    elif type(x) is Dual:
        dx = <Dual>x
        if dx.op is None and dx.ftrace.active:
            if type(y) is Dual:
                dy = <Dual>y
                if dy.ftrace is dx.ftrace and dy.op is None:
                    scalar_eval(op, dx.dp, dy.dp, &v, &d0, &d1)
                    return new_dual(dx.ftrace, v, d0 * dx.dt + d1 * dy.dt, None, None)
            elif is_fast_number(y):
                scalar_eval(op, dx.dp, <double>y, &v, &d0, &d1)
                return new_dual(dx.ftrace, v, d0 * dx.dt, None, None)
    elif type(y) is Dual:
        dy = <Dual>y
        if dy.op is None and dy.ftrace.active and is_fast_number(x):
            scalar_eval(op, <double>x, dy.dp, &v, &d0, &d1)
            return new_dual(dy.ftrace, v, d1 * dy.dt, None, None)
    return None


cdef inline object unary(int op, object x):
    """Apply unary opcode ``op``; C fast paths for unboxed scalars."""
    r = unary_scalar(op, x)
    if r is not None:
        return r
    if type(x) is Dual:
        return _bind(_UNARY_PRIMS[op], (x,), _NO_PARAMS)
    r = small_unary(op, x)              # small float64 vectors: per element, in C
    if r is not None:
        return r
    return _bind(_UNARY_PRIMS[op], (x,), _NO_PARAMS)


cdef inline object unary_scalar(int op, object x):
    """Unary opcode ``op`` on an unboxed scalar as a scalar node or dual, in C;
    None for anything else."""
    cdef Tracer tx
    cdef Dual dx
    cdef double v, d0, d1
    if type(x) is Tracer:
        tx = <Tracer>x
        if tx.oval is None and tx.tape.active:
            scalar_eval(op, tx.dval, 0.0, &v, &d0, &d1)
            return tx.tape.push_scalar(op, tx.idx, -1, v, d0, 0.0)
    elif type(x) is Dual:
        dx = <Dual>x
        if dx.op is None and dx.ftrace.active:
            scalar_eval(op, dx.dp, 0.0, &v, &d0, &d1)
            return new_dual(dx.ftrace, v, d0 * dx.dt, None, None)
    return None


def classify_leaves(seq):
    """2 when every item of list/tuple ``seq`` is a Python float, 3 when every
    item is a ``np.float64`` (``list(array)`` gives those), 1 when every item
    is a number or an array (a flat pytree), else 0."""
    cdef int kind = -1, this
    cdef object t
    for x in seq:
        t = type(x)
        if t is float or t is _NP_F64:
            this = 2 if t is float else 3
            if kind == -1:
                kind = this
            elif kind != this:
                kind = 1            # mixed floats and np.float64: a flat pytree
            continue
        if t is int or t is np.ndarray or t is np.float32:
            kind = 1
        else:
            return 0
    return 2 if kind == -1 else kind


def guard_value(x, fn, result, str what="a value"):
    """Record on every tape that boxes ``x`` that ``fn(x's value) == result``
    was used to decide something; replaying the tape re-checks it."""
    while type(x) is Tracer or type(x) is Dual:
        if type(x) is Tracer and (<Tracer>x).tape.active:
            (<Tracer>x).tape.guard_value(x, fn, result, what)
        x = primal_of(x)


cpdef tuple shape_of(object x):
    """``np.shape(x)`` without numpy's dispatch (boxes, arrays, numbers); one
    lane's shape for a ``Batched``."""
    cdef list bdims = None
    cdef tuple shape
    while True:
        if type(x) is Tracer or type(x) is Dual:
            x = primal_of(x)
        elif type(x) is Batched:
            if bdims is None:
                bdims = []
            bdims.append((<Batched>x).bdim)
            x = (<Batched>x).val
        else:
            break
    if type(x) is np.ndarray:
        shape = (<object>x).shape
    elif type(x) is float or type(x) is int:
        shape = ()
    else:
        shape = tuple(np.shape(x))
    if bdims is not None:          # innermost batch axis removed last
        for k in range(len(bdims) - 1, -1, -1):
            shape = shape[:bdims[k]] + shape[bdims[k] + 1:]
    return shape


cpdef int ndim_of(object x):
    """``np.ndim(x)`` without numpy's dispatch."""
    return len(shape_of(x))


def rebind_tracer(x, new):
    """Make box ``x`` stand for ``new`` (same trace): in-place index assignment.

    ``y[i] = v`` on a traced array records a functional update ``new`` and
    then rebinds ``y`` to it, so later uses of ``y`` see the updated node.
    """
    cdef Tracer tx, tn
    cdef Dual dx, dn
    if type(x) is Tracer and type(new) is Tracer:
        tx, tn = <Tracer>x, <Tracer>new
        if tx.tape is not tn.tape:
            raise ValueError("rebind_tracer: both tracers must be on the same tape")
        tx.idx, tx.dval, tx.oval = tn.idx, tn.dval, tn.oval
    elif type(x) is Dual and type(new) is Dual:
        dx, dn = <Dual>x, <Dual>new
        if dx.ftrace is not dn.ftrace:
            raise ValueError("rebind_tracer: both duals must belong to the same trace")
        dx.dp, dx.dt, dx.op, dx.ot = dn.dp, dn.dt, dn.op, dn.ot
    elif type(x) is Batched and type(new) is Batched:
        if (<Batched>x).btrace is not (<Batched>new).btrace:
            raise ValueError("rebind_tracer: both batched values must belong to the same vmap")
        (<Batched>x).val, (<Batched>x).bdim = (<Batched>new).val, (<Batched>new).bdim
    else:
        raise TypeError(f"rebind_tracer: cannot rebind a {type(x).__name__} to a "
                        f"{type(new).__name__}; the update must stay on the same trace")


def apply_binary(int op, x, y):
    """Python entry to ``binary``: apply scalar opcode ``op`` to (x, y)."""
    return binary(op, x, y)


def apply_unary(int op, x):
    """Python entry to ``unary``: apply scalar opcode ``op`` to x."""
    return unary(op, x)


def scalar_rule(int op, double x, double y=0.0):
    """(value, d0, d1) of scalar opcode ``op`` at (x, y), from the C kernel."""
    cdef double v, d0, d1
    if scalar_eval(op, x, y, &v, &d0, &d1) != 0:
        raise ValueError(f"unknown scalar opcode {op}")
    return v, d0, d1


include "_core_opcode_names.pxi"


# comparisons -------------------------------------------------------------

_CMP = (np.less, np.less_equal, np.greater, np.greater_equal, np.equal,
        np.not_equal)


cpdef object primal_of(object x):
    """The value a box carries (itself for a non-box)."""
    if type(x) is Tracer:
        return (<Tracer>x).dval if (<Tracer>x).oval is None else (<Tracer>x).oval
    if type(x) is Dual:
        return (<Dual>x).dp if (<Dual>x).op is None else (<Dual>x).op
    if type(x) is Batched:
        raise_batch_read(x, "the value")
    return x


cpdef object concrete(object x):
    """Strip every level of boxing: the plain number or array inside."""
    while isinstance(x, Box):
        x = primal_of(x)
    return x


cdef object _batched_inside(object x):
    """The ``Batched`` under the tape and forward levels of ``x``, or None."""
    while type(x) is Tracer or type(x) is Dual:
        x = primal_of(x)
    return x if type(x) is Batched else None


cdef object compare(object x, object y, int code):
    cdef Batched bb
    if type(x) is Batched or type(y) is Batched:
        # the common case in C: the stacked lanes (a plain numeric array, lanes
        # on axis 0) against a number, what batch_compare computes and boxes
        if type(x) is Batched and is_fast_number(y):
            bb = <Batched>x
            if bb.bdim == 0 and type(bb.val) is np.ndarray and \
                    arr_type(bb.val) != cnp.NPY_OBJECT:
                return new_batched(bb.btrace, _CMP[code](bb.val, y), 0)
        elif type(y) is Batched and is_fast_number(x):
            bb = <Batched>y
            if bb.bdim == 0 and type(bb.val) is np.ndarray and \
                    arr_type(bb.val) != cnp.NPY_OBJECT:
                return new_batched(bb.btrace, _CMP[code](x, bb.val), 0)
        return _box_methods["batch_compare"](x, y, code)
    cdef object bx = _batched_inside(x), by = _batched_inside(y)
    if bx is not None or by is not None:
        # a tape or forward trace started inside vmap: the comparison of the
        # stacked lanes (bool() then splits the batch where they disagree);
        # the tape cannot check it on a replay, so replays refuse it
        for b in (x, y):
            if type(b) is Tracer and (<Tracer>b).tape.active:
                (<Tracer>b).tape.values_read += 1
        return _box_methods["batch_compare"](bx if bx is not None else concrete(x),
                                             by if by is not None else concrete(y), code)
    cdef object xv = concrete(x), yv = concrete(y)
    cdef object out = _CMP[code](xv, yv)
    if isinstance(out, np.ndarray) and out.ndim > 0:
        result = out
    else:
        result = bool(out)
    cdef Tape last = None
    if (type(x) is not Tracer or (<Tracer>x).oval is None) and \
            (type(y) is not Tracer or (<Tracer>y).oval is None):
        # boxes of one level (the common case): their tapes check the result
        for b in (x, y):
            if type(b) is Tracer and (<Tracer>b).tape.active and (<Tracer>b).tape is not last:
                last = (<Tracer>b).tape
                last.guard(code, x, y, result)
        return result
    # nested boxes: every tape that records x or y, at any level, checks the
    # result on its replays (a branch inside ta.grad under ta.jit)
    cdef list tapes = []
    _recording_tapes(x, tapes)
    _recording_tapes(y, tapes)
    for t in tapes:
        (<Tape>t).guard(code, _box_on(x, <Tape>t), _box_on(y, <Tape>t), result)
    return result


cdef void _recording_tapes(object x, list tapes):
    """Append the active tapes that hold ``x`` at some level (each once)."""
    cdef Py_ssize_t k
    cdef bint seen
    while type(x) is Tracer or type(x) is Dual:
        if type(x) is Tracer and (<Tracer>x).tape.active:
            seen = False
            for k in range(len(tapes)):
                if tapes[k] is (<Tracer>x).tape:
                    seen = True
            if not seen:
                tapes.append((<Tracer>x).tape)
        x = primal_of(x)


cdef object _box_on(object x, Tape tape):
    """The box of ``x`` on ``tape`` (``x`` itself when no level of it is there)."""
    cdef object b = x
    while type(b) is Tracer or type(b) is Dual:
        if type(b) is Tracer and (<Tracer>b).tape is tape:
            return b
        b = primal_of(b)
    return x


cpdef bint is_recorded(object x):
    """Whether a tape that will be replayed (``Tape.replayable``: ``ta.jit``'s
    recordings) is recording ``x``, at any level of its boxing.  Code that
    computes a constant from a traced value (a mask, a sign, a count) asks
    this first: on such a tape the constant must be a recorded node (so a
    replay recomputes it) or a guard (so a replay checks it), never a frozen
    number."""
    cdef list stack = [x]
    while stack:
        x = stack.pop()
        if type(x) is Tracer:
            if (<Tracer>x).tape.active and (<Tracer>x).tape.replayable:
                return True
            if (<Tracer>x).oval is not None:
                stack.append((<Tracer>x).oval)
        elif type(x) is Dual:
            if (<Dual>x).op is not None:
                stack.append((<Dual>x).op)
            if (<Dual>x).ot is not None:
                stack.append((<Dual>x).ot)
        elif type(x) is Batched:
            stack.append((<Batched>x).val)
    return False


def any_recorded(*xs):
    """``is_recorded`` of any of ``xs``."""
    for x in xs:
        if is_recorded(x):
            return True
    return False


cdef raise_conversion(object x, str kind):
    raise TypeError(
        f"{kind}() of a traced value would drop its derivative (the result would be a "
        "constant, silently). Keep computing with the traced value; use tapead.numpy "
        "functions instead of math.* ones; to assign into a numpy array, start from a "
        "traced one (A = x * np.zeros(n), or tapead.numpy.at(A)[i].set(x)), or build "
        "the array with np.stack / tapead.numpy.array. If you really want the number as "
        f"a constant, with no derivative through it, use {kind}(x.primal).")


cdef object _OBJECT_DTYPE = np.dtype(object)


cdef bint holds_integers(object x):
    """Whether box ``x`` holds integers or bools (a scalar tracer or dual never does)."""
    if type(x) is Tracer and (<Tracer>x).oval is None:
        return False
    if type(x) is Dual and (<Dual>x).op is None:
        return False
    return np.dtype(x.dtype).kind in "iub"


cdef object integer_of(object x, str kind):
    """``int(x)`` / ``operator.index(x)`` of a box: the value of a box holding an
    integer (no derivative to lose; the Python layer guards it on the tapes,
    ``tapead._prims.integers``), else the TypeError of a dropped derivative."""
    cdef str k = np.dtype(x.dtype).kind
    if _box_methods is not None and (k in "iu" or (k == "b" and kind == "int")):
        return _box_methods["integer_value"](x, kind)
    if kind == "index":
        raise TypeError(
            "a traced value cannot be used as an index: its derivative would be lost. "
            "An index must be an integer: convert a traced position with "
            "np.floor(p).astype(int) (no derivative; what it gathers keeps its "
            "derivative), or use an integer array computed from concrete values")
    raise_conversion(x, kind)


cdef object array_of(object x, object dtype):
    """``np.asarray(x, dtype)`` of a box: a plain array when no derivative is
    lost (integers, see ``tapead._prims.integers.array_value``), else the
    TypeError of ``array_conversion_message``."""
    cdef object out = None
    if _box_methods is not None and "array_value" in _box_methods:
        out = _box_methods["array_value"](x, dtype)
    if out is not None:
        return out
    raise TypeError(array_conversion_message(x, dtype))


def array_conversion_message(object x=None, object dtype=None):
    """The message of the TypeError of ``np.asarray(tracer)``: the Python layer's
    (installed as ``"array_message"``; it names the tapead function to call when
    a scipy function converted the tracer), else the generic one."""
    if dtype is not None and dtype != _OBJECT_DTYPE:
        what = f"a numpy array of dtype {np.dtype(dtype)}"
    else:
        what = "a numpy array"
    generic = (
        f"a traced value cannot be turned into {what}: that would drop its "
        "derivative. Use numpy functions (they dispatch to tapead) or tapead.numpy "
        "ones; build arrays from traced values with np.stack([...]) or "
        "tapead.numpy.array([...]); for scipy functions use their tapead "
        "counterparts (tapead.scipy.special, tapead.scipy.linalg): scipy's own "
        "compiled code cannot see through tracers. If you really want the value as a "
        "constant, with no derivative through it, use x.primal.")
    hint = None if _box_methods is None else _box_methods.get("array_message")
    if hint is not None:
        try:
            return hint(generic)
        except Exception:                  # a message must never fail
            pass
    return generic


include "_core_prim.pxi"
include "_core_fused.pxi"
include "_core_ufuncs.pxi"
include "_core_tape.pxi"
include "_core_sweep.pxi"
include "_core_adjoints.pxi"
include "_core_elements.pxi"
include "_core_small.pxi"
include "_core_replay.pxi"
include "_core_fusion.pxi"
include "_revolve_kernel.pxi"
include "_core_loop.pxi"
include "_core_scan.pxi"
include "_core_forward.pxi"

include "_core_batch.pxi"
include "_core_pool.pxi"
include "_core_probes.pxi"
