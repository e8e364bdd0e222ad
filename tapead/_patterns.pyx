"""Sparsity propagation over a recorded tape, without numbers.

Every node gets a *pattern*: which input elements its elements depend on.
A scalar node's pattern is a sorted, duplicate-free int32 array of input
element indices (one row); an object node's pattern is whatever the object
rule returns (a ``scipy.sparse.csr_array`` of shape (node size, n inputs),
see :mod:`tapead.sparse`).  The loop over node ids is here, in C: scalar
nodes take the union of their operands' sets (a sorted merge, ``nogil``),
unary and constant-operand nodes share their operand's array, and object
nodes (inputs included) call back into Python.  Guards get ``None``.

Opcode ranges (``tapead/_opcodes.pxd``, generated from tools/opcodes.txt): 0 input, 1 object node, 2 guard,
10..29 binary, 30..49 one operand and a constant (``b == -1``), >= 50 unary.
Opcodes whose partials are identically zero (``sign``; the ``zero`` column of
tools/opcodes.txt) add no dependence: their nodes get the empty set.
"""
import numpy as np

from tapead._opcodes cimport (OP_INPUT, OP_OBJ, OP_GUARD, OP_ELEM, FIRST_BINARY, FIRST_CONST,
                              zero_derivative)


cdef Py_ssize_t _merge_kernel(const int[::1] x, const int[::1] y,
                              int[::1] out) noexcept nogil:
    """Sorted union of two sorted duplicate-free arrays; returns its length."""
    cdef Py_ssize_t i = 0, j = 0, k = 0, nx = x.shape[0], ny = y.shape[0]
    while i < nx and j < ny:
        if x[i] < y[j]:
            out[k] = x[i]
            i += 1
        elif y[j] < x[i]:
            out[k] = y[j]
            j += 1
        else:
            out[k] = x[i]
            i += 1
            j += 1
        k += 1
    while i < nx:
        out[k] = x[i]
        i += 1
        k += 1
    while j < ny:
        out[k] = y[j]
        j += 1
        k += 1
    return k


def union_sorted(x, y):
    """Sorted union of two sorted, duplicate-free int32 arrays (new array).

    >>> import numpy as np
    >>> union_sorted(np.array([0, 3], np.int32), np.array([1, 3, 4], np.int32))
    array([0, 1, 3, 4], dtype=int32)
    """
    cdef const int[::1] xv = np.ascontiguousarray(x, dtype=np.int32)
    cdef const int[::1] yv = np.ascontiguousarray(y, dtype=np.int32)
    out = np.empty(xv.shape[0] + yv.shape[0], dtype=np.int32)
    cdef int[::1] ov = out
    cdef Py_ssize_t k
    with nogil:
        k = _merge_kernel(xv, yv, ov)
    return out[:k]


def propagate(const int[::1] op, const int[::1] a, const int[::1] b,
              object object_rule, object row_set):
    """Patterns of every node of a tape, in node-id order.

    Parameters
    ----------
    op, a, b : int32 arrays, shape (n,)
        ``Tape.export_nodes()``.
    object_rule : callable ``(i, pats) -> pattern``
        Pattern of object node, input or element node ``i`` (an element
        of an array node, ``x[i]``) given the list of patterns computed so
        far (entries below ``i`` are final).
    row_set : callable ``pattern -> int32 array``
        The one-row index set of an object node's pattern when a scalar node
        reads it (an object node of size 1).

    Returns
    -------
    list
        One pattern per node (``None`` for guards).
    """
    cdef Py_ssize_t n = op.shape[0], i
    cdef int o, ia, ib
    cdef list pats = [None] * n
    cdef object pa, pb
    empty = np.empty(0, dtype=np.int32)
    for i in range(n):
        o = op[i]
        if o == OP_INPUT or o == OP_OBJ or o == OP_ELEM:
            pats[i] = object_rule(i, pats)
            continue
        if o == OP_GUARD:
            continue
        if zero_derivative(o):             # partials identically 0 (the zero column
            pats[i] = empty                # of tools/opcodes.txt): no dependence
            continue
        ia = a[i]
        ib = b[i]
        pa = pats[ia] if ia >= 0 else empty
        if type(pa) is not np.ndarray:
            pa = row_set(pa)
        if o < FIRST_BINARY or o >= FIRST_CONST or ib < 0:
            pats[i] = pa
            continue
        pb = pats[ib]
        if type(pb) is not np.ndarray:
            pb = row_set(pb)
        if pa is pb or len(pb) == 0:
            pats[i] = pa
        elif len(pa) == 0:
            pats[i] = pb
        else:
            pats[i] = union_sorted(pa, pb)
    return pats
