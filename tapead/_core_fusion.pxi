# Fused groups of elementwise array nodes (included by _core.pyx).
#
# A ``FusedGroup`` evaluates a chain of elementwise float64 primitives (the
# nodes of one group found by ``tapead.compiler.fusion``) in one pass over
# blocks of ``FUSED_BLOCK`` elements: each operation runs numpy's own inner
# loop for float64 (the ufunc's machine code, taken from the ufunc object) on
# a block, reading its operands from the group's inputs or from block-sized
# scratch buffers, so intermediates that only feed the next operation never
# exist as whole arrays, and every value is the bits numpy computes.  Only
# the nodes read outside the group are written out as arrays.
#
# A values-only replay (``Tape.evaluate``, ``replay(partials=False)``) runs
# the group at its last node and skips the others; a replay with partials
# ignores the groups.

cnp.import_ufunc()

ctypedef void (*float64_loop)(char **args, const cnp.npy_intp *dims, const cnp.npy_intp *steps,
                              void *data) noexcept nogil
# A group's native kernel (``tapead.compiler.native``): the whole group in one
# loop of C compiled from the group's operations.  base/step/scal as run()
# fills them (a scratch slot's base is NULL: the kernel keeps it in a local).
ctypedef void (*native_kernel)(char **base, const cnp.npy_intp *step, double *scal,
                               cnp.npy_intp n) noexcept nogil

cdef enum:
    FUSED_BLOCK = 1024          # elements per block: the scratch buffers stay in L1/L2
    SLOT_TEMP = 0               # a block-sized scratch buffer
    SLOT_ARRAY = 1              # an input node's float64 array of the group's shape (1-d with
                                # any stride, or C-contiguous)
    SLOT_SCALAR = 2             # an input node's float, or a constant (step 0)
    SLOT_OUTPUT = 3             # a node written out as a whole array
    SLOT_REDUCE = 4             # a full sum of a member (op ufunc None): a float64 scalar
                                # node, computed by native kernels only (numpy's pairwise
                                # order, so numpy's bits)


cdef object _ufunc_loop(cnp.ufunc u, int nargs):
    """(loop function, its data) of ufunc ``u`` for all-float64 operands, or None."""
    cdef int k, j
    if u.nargs != nargs:
        return None
    for k in range(u.ntypes):
        for j in range(nargs):
            if u.types[k * nargs + j] != cnp.NPY_DOUBLE:
                break
        else:
            return (<size_t>u.functions[k], <size_t>u.data[k])
    return None


def ufunc_has_float64_loop(u, int nin):
    """Whether numpy ufunc ``u`` has ``nin`` inputs, one output and an all-float64 loop."""
    if not isinstance(u, np.ufunc) or u.nin != nin or u.nout != 1:
        return False
    return _ufunc_loop(<cnp.ufunc>u, nin + 1) is not None


@cython.final
cdef class FusedGroup:
    """One pass over blocks for a group of elementwise nodes.

    Parameters
    ----------
    shape : tuple
        The shape of every node of the group.
    slots : list of (kind, node, const)
        The operands: ``SLOT_TEMP`` (scratch), ``SLOT_ARRAY`` (node ``node``'s
        array), ``SLOT_SCALAR`` (node ``node``'s float, or ``const`` when
        ``node < 0``), ``SLOT_OUTPUT`` (node ``node``, written out).
    ops : list of (ufunc, input slots, output slot)
        In order; each runs the ufunc's float64 loop.  A ufunc None is the
        full sum of its input into a ``SLOT_REDUCE`` slot: such a group runs
        only through a native kernel (``set_native``).
    members : list of int
        The group's node ids, the last one the node the group runs at.
    """
    cdef readonly tuple shape
    cdef readonly list members
    cdef readonly list outputs          # node ids written out
    cdef readonly Py_ssize_t size
    cdef Py_ssize_t n_ops, n_slots
    cdef void **fns
    cdef void **datas
    cdef int *nin
    cdef int *ins                       # 2 per op
    cdef int *outs
    cdef int *kinds
    cdef Py_ssize_t *nodes
    cdef double *consts
    cdef readonly list ufuncs
    cdef readonly list slots            # as given: (kind, node, const)
    cdef readonly list ops              # as given: (ufunc, input slots, output slot)
    cdef readonly bint needs_native     # a sum inside: runs through a native kernel only
    cdef void *native                   # the compiled kernel, or NULL
    cdef object native_owner            # what keeps the kernel's library loaded

    def __cinit__(self, shape, slots, ops, members):
        cdef Py_ssize_t k
        self.shape = tuple(shape)
        self.slots = [tuple(x) for x in slots]
        self.ops = [(u, tuple(i), o) for u, i, o in ops]
        self.native = NULL
        self.native_owner = None
        self.size = 1
        for d in self.shape:
            self.size *= <Py_ssize_t>d
        self.members = list(members)
        self.n_slots = len(slots)
        self.n_ops = len(ops)
        self.fns = <void **>calloc(self.n_ops + 1, sizeof(void *))
        self.datas = <void **>calloc(self.n_ops + 1, sizeof(void *))
        self.nin = <int *>calloc(self.n_ops + 1, sizeof(int))
        self.ins = <int *>calloc(2 * self.n_ops + 2, sizeof(int))
        self.outs = <int *>calloc(self.n_ops + 1, sizeof(int))
        self.kinds = <int *>calloc(self.n_slots + 1, sizeof(int))
        self.nodes = <Py_ssize_t *>calloc(self.n_slots + 1, sizeof(Py_ssize_t))
        self.consts = <double *>calloc(self.n_slots + 1, sizeof(double))
        if not (self.fns and self.datas and self.nin and self.ins and self.outs and
                self.kinds and self.nodes and self.consts):
            raise MemoryError("cannot allocate a fused group")
        self.outputs = []
        for k, (kind, node, c) in enumerate(slots):
            if kind not in (SLOT_TEMP, SLOT_ARRAY, SLOT_SCALAR, SLOT_OUTPUT, SLOT_REDUCE):
                raise ValueError(f"FusedGroup: slot {k} has an unknown kind {kind!r}")
            self.kinds[k] = kind
            self.nodes[k] = node
            self.consts[k] = c
            if kind == SLOT_OUTPUT or kind == SLOT_REDUCE:
                self.outputs.append(node)
        self.ufuncs = []
        self.needs_native = False
        for k, (u, in_slots, out_slot) in enumerate(ops):
            n = len(in_slots)
            if u is None:
                if n != 1 or not 0 <= out_slot < self.n_slots or \
                        self.kinds[out_slot] != SLOT_REDUCE:
                    raise ValueError(f"FusedGroup: op {k} (a sum) must read one slot "
                                     "and write a SLOT_REDUCE slot")
                self.needs_native = True
                self.nin[k] = 1
                self.ins[2 * k] = in_slots[0]
                self.outs[k] = out_slot
                self.ufuncs.append(u)
                continue
            loop = _ufunc_loop(<cnp.ufunc?>u, n + 1) if n in (1, 2) else None
            if loop is None:
                raise TypeError(f"FusedGroup: {u!r} has no float64 loop of {n} inputs")
            for s in list(in_slots) + [out_slot]:
                if not 0 <= s < self.n_slots:
                    raise ValueError(f"FusedGroup: op {k} names slot {s} of {self.n_slots}")
            if self.kinds[out_slot] not in (SLOT_TEMP, SLOT_OUTPUT):
                raise ValueError(f"FusedGroup: op {k} writes into an input slot")
            self.fns[k] = <void *><size_t>loop[0]
            self.datas[k] = <void *><size_t>loop[1]
            self.nin[k] = n
            self.ins[2 * k] = in_slots[0]
            self.ins[2 * k + 1] = in_slots[1] if n == 2 else 0
            self.outs[k] = out_slot
            self.ufuncs.append(u)

    def __dealloc__(self):
        free(self.fns); free(self.datas); free(self.nin); free(self.ins); free(self.outs)
        free(self.kinds); free(self.nodes); free(self.consts)

    @property
    def n_ops(self):
        return self.n_ops

    def set_native(self, size_t address, owner):
        """Run the group through a compiled kernel at ``address`` from now on
        (``address`` 0: numpy's loops again).  ``owner`` keeps the kernel's
        library loaded while the group uses it."""
        self.native_owner = owner if address else None
        self.native = <void *>address

    @property
    def is_native(self):
        """Whether the group runs a compiled kernel."""
        return self.native != NULL

    cdef int run(self, Tape tp) except -1:
        """Evaluate the group from the tape's current values and store the
        written-out nodes' arrays on their records."""
        cdef Py_ssize_t k, s, start, m, N = self.size
        cdef char **base = <char **>malloc((self.n_slots + 1) * sizeof(char *))
        cdef cnp.npy_intp *step = <cnp.npy_intp *>malloc((self.n_slots + 1) * sizeof(cnp.npy_intp))
        cdef double *scratch = NULL
        cdef double *scal = <double *>malloc((self.n_slots + 1) * sizeof(double))
        cdef char *args[3]
        cdef cnp.npy_intp steps[3]
        cdef cnp.npy_intp n_block
        cdef Py_ssize_t n_temp = 0
        cdef int j, kind
        cdef list keep = []             # the arrays the pointers point into
        cdef list written = []          # the output slots' arrays, in slot order
        cdef object v
        cdef void *kern = self.native
        cdef object owner = self.native_owner     # held for the call
        if base == NULL or step == NULL or scal == NULL:
            free(base); free(step); free(scal)
            raise MemoryError("fused group: no memory")
        if kern == NULL and self.needs_native:
            free(base); free(step); free(scal)
            raise RuntimeError("a fused group with a sum ran without its native kernel")
        try:
            for s in range(self.n_slots):
                if self.kinds[s] == SLOT_TEMP and kern == NULL:
                    n_temp += 1
            if n_temp:
                scratch = <double *>malloc(n_temp * FUSED_BLOCK * sizeof(double))
                if scratch == NULL:
                    raise MemoryError("fused group: no memory")
            n_temp = 0
            for s in range(self.n_slots):
                kind = self.kinds[s]
                if kind == SLOT_TEMP and kern != NULL:
                    base[s] = NULL
                    step[s] = 0
                elif kind == SLOT_TEMP:
                    base[s] = <char *>(scratch + n_temp * FUSED_BLOCK)
                    step[s] = sizeof(double)
                    n_temp += 1
                elif kind == SLOT_REDUCE:
                    scal[s] = 0.0
                    base[s] = <char *>&scal[s]
                    step[s] = 0
                elif kind == SLOT_SCALAR:
                    if self.nodes[s] >= 0:
                        v = tp.value(self.nodes[s])
                        if not isinstance(v, float):
                            raise TapeReplayError(
                                f"a fused group's scalar operand (node {self.nodes[s]}) is "
                                f"a {type(v).__name__} at these inputs; re-record")
                        scal[s] = <double>v
                    else:
                        scal[s] = self.consts[s]
                    base[s] = <char *>&scal[s]
                    step[s] = 0
                elif kind == SLOT_ARRAY:
                    v = tp.value(self.nodes[s])
                    if not (cnp.PyArray_CheckExact(v) and
                            cnp.PyArray_TYPE(<cnp.ndarray>v) == cnp.NPY_DOUBLE and
                            cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>v) and
                            (<object>v).shape == self.shape and
                            (cnp.PyArray_NDIM(<cnp.ndarray>v) == 1 or
                             cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>v))):
                        raise TapeReplayError(
                            f"a fused group's operand (node {self.nodes[s]}) is not a "
                            f"float64 array of shape {self.shape}, 1-d or C-contiguous, "
                            "at these inputs; re-record")
                    keep.append(v)
                    base[s] = cnp.PyArray_BYTES(<cnp.ndarray>v)
                    step[s] = (cnp.PyArray_STRIDE(<cnp.ndarray>v, 0)
                               if cnp.PyArray_NDIM(<cnp.ndarray>v) == 1 else sizeof(double))
                else:
                    v = np.empty(self.shape, dtype=np.float64)
                    written.append(v)
                    base[s] = cnp.PyArray_BYTES(<cnp.ndarray>v)
                    step[s] = sizeof(double)
            if kern != NULL:
                n_block = N
                with nogil:
                    (<native_kernel>kern)(base, step, scal, n_block)
            else:
                with nogil:
                    start = 0
                    while start < N:
                        m = N - start
                        if m > FUSED_BLOCK:
                            m = FUSED_BLOCK
                        n_block = m
                        for k in range(self.n_ops):
                            for j in range(self.nin[k] + 1):
                                s = self.ins[2 * k + j] if j < self.nin[k] else self.outs[k]
                                if self.kinds[s] == SLOT_ARRAY or self.kinds[s] == SLOT_OUTPUT:
                                    args[j] = base[s] + start * step[s]
                                else:
                                    args[j] = base[s]
                                steps[j] = step[s]
                            (<float64_loop>self.fns[k])(args, &n_block, steps, self.datas[k])
                        start += m
            k = 0
            for s in range(self.n_slots):
                if self.kinds[s] == SLOT_OUTPUT:
                    (<Record>tp.recs[<Py_ssize_t>tp.p0[self.nodes[s]]]).ans = written[k]
                    k += 1
                elif self.kinds[s] == SLOT_REDUCE:     # a float node, as the replay keeps
                    (<Record>tp.recs[<Py_ssize_t>tp.p0[self.nodes[s]]]).ans = scal[s]
                    tp.val[self.nodes[s]] = scal[s]
        finally:
            free(base); free(step); free(scal); free(scratch)
        return 0
