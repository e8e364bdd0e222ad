# The Tape: flat node storage, the reverse sweep, the K-direction forward
# sweep and replay (included by _core.pyx).
#
# Node layout (struct of arrays, one slot per node id):
#     op  int32   opcode (OP_INPUT, OP_OBJ, OP_GUARD, OP_ELEM or a scalar opcode)
#     a   int32   first operand node id, -1 for none (OP_ELEM: the array's node)
#     b   int32   second operand node id, -1 for none or a constant
#                 (OP_ELEM: the element's flat position, _core_elements.pxi)
#     val double  the value (scalar nodes; float-valued object nodes)
#     p0  double  d val / d a            (object/guard nodes: record index)
#     p1  double  d val / d b            (constant ops: the constant c)
# 36 bytes a scalar node.  Adjoint buffers keep one scratch slot at index
# -1 (zeroed after each sweep); the reverse sweeps skip missing operands
# with a branch instead of adding into it (sweep_scalar).

cdef enum:
    SCALAR_NODE_BYTES = 36
    NOGIL_SWEEP = 32        # scalar sweeps at least this long run without the GIL


cdef void sweep_scalar(const int32_t *op, const int32_t *a, const int32_t *b,
                       const double *p0, const double *p1, double *adj,
                       Py_ssize_t top, Py_ssize_t *steps) noexcept nogil:
    """Reverse sweep of a tape made of scalar nodes only (adj has slot -1).

    A missing operand (-1: a unary or constant op's ``b``, an input's both)
    is skipped rather than added into the scratch slot: every such node would
    otherwise add into that one slot, a chain of dependent loads and stores
    through the whole sweep (B1's sweep 16 -> 9 us in a C model of it)."""
    cdef Py_ssize_t i, n_steps = 0
    cdef int32_t ia, ib
    cdef double g
    for i in range(top, -1, -1):
        g = adj[i]
        if g != 0.0:
            n_steps += 1
            ia = a[i]
            ib = b[i]
            if ia >= 0:
                adj[ia] += g * p0[i]
            if ib >= 0:
                adj[ib] += g * p1[i]
    adj[-1] = 0.0
    steps[0] = n_steps


cdef inline bint _is_scalar_float(object c):
    return isinstance(c, float) or (
        isinstance(c, np.ndarray) and (<object>c).ndim == 0 and
        (<object>c).dtype == np.float64)


cdef tuple _ONE_NONE = (None,)
cdef tuple _TWO_NONE = (None, None)
cdef tuple _ONE_CONST = (-1,)
cdef double _NAN = float("nan")      # the value slot of an array node (no np.nan lookup)


# The scalar buffers of the last large tape freed, kept for the next one: a
# tape of 10^4-10^6 nodes otherwise faults in fresh pages on every call (the
# system takes large freed blocks back), which cost more than recording.
# Tapes are made and freed with the GIL held, so one module-level set is safe.
cdef struct _SpareBuffers:
    Py_ssize_t cap
    int32_t *op
    int32_t *a
    int32_t *b
    double *val
    double *p0
    double *p1
    double *adj
    Py_ssize_t adj_cap

cdef _SpareBuffers _spare
_spare.cap = 0
_spare.adj = NULL
_spare.adj_cap = 0

cdef enum:
    SPARE_MIN = 4096                 # nodes: smaller tapes come from malloc's own lists
    SPARE_MAX = 2097152              # nodes (72 MB of buffers): larger ones are given back


cdef void spare_release():
    if _spare.cap:
        free(_spare.op); free(_spare.a); free(_spare.b)
        free(_spare.val); free(_spare.p0); free(_spare.p1)
    free(_spare.adj)
    _spare.cap = 0
    _spare.adj = NULL
    _spare.adj_cap = 0


cdef int _check_node_ids(object ids, Py_ssize_t n, str what) except -1:
    """Refuse a node id outside 0..n-1 (the sweeps index C buffers with them)."""
    cdef Py_ssize_t i
    if type(ids) is range and (<object>ids).step == 1:
        if len(ids) and ((<object>ids).start < 0 or (<object>ids).stop > n):
            raise IndexError(f"{what}: nodes {ids} are not all on this tape ({n} nodes)")
        return 0
    for j in ids:
        i = j
        if i < 0 or i >= n:
            raise IndexError(f"{what}: node {i} is not on this tape ({n} nodes)")
    return 0


cdef int _clear_object_adjoints(list oadj, const unsigned char *hobj, Py_ssize_t nn) except -1:
    """Put None back where a sweep stored an object adjoint (every store sets
    ``hobj``), so the list can serve the next sweep of the tape."""
    cdef Py_ssize_t i, w, nw = nn // 8
    cdef uint64_t word
    for w in range(nw):             # eight flags at a time: most are zero
        memcpy(&word, hobj + 8 * w, 8)
        if word:
            for i in range(8 * w, 8 * w + 8):
                if hobj[i]:
                    oadj[i] = None
    for i in range(8 * nw, nn):
        if hobj[i]:
            oadj[i] = None
    return 0


@cython.final
cdef class Tape(Trace):
    """A Wengert tape: an append-only list of nodes and their local rules.

    Parameters
    ----------
    capacity : int
        Initial number of node slots (grows by doubling).

    Attributes
    ----------
    n_nodes : int
        Number of recorded nodes.
    inputs : list of int
        Node ids of the inputs, in the order they were created.
    last_sweep_steps : int
        Number of nodes whose rule ran in the last reverse sweep.
    partials_stale : bool
        The last replay computed values only (``evaluate``, or ``replay``
        with ``partials=False``) or stopped at an error: the sweeps refuse
        the tape until a full ``replay``.
    """
    cdef int32_t *op
    cdef int32_t *a
    cdef int32_t *b
    cdef double *val
    cdef double *p0
    cdef double *p1
    cdef Py_ssize_t n, cap
    cdef list recs
    cdef readonly list inputs
    cdef readonly Py_ssize_t last_sweep_steps
    #: how many times user code read a traced value's number (``x.primal``,
    #: ``x.value``) while this tape recorded: a replay cannot update what Python
    #: computed from it, so replaying consumers (ta.record, ta.jit, recorded loop
    #: bodies) refuse or re-record such a tape
    cdef public Py_ssize_t values_read
    #: this tape will be replayed at new inputs (``ta.jit`` sets it before it
    #: records): constants computed from its values while it records become
    #: recorded nodes or guards (``is_recorded``), not frozen numbers
    cdef public bint replayable
    cdef Py_ssize_t n_obj
    cdef double *adj_cache          # reused adjoint buffer (slot -1 first)
    cdef Py_ssize_t adj_cap
    cdef bint sweeping
    cdef readonly bint partials_stale   # last replay computed values only
    cdef dict elem_ids              # array node id -> its element nodes' ids (small vectors)
    cdef bytearray replay_kinds     # per node, how a replay computes it (_core_replay.pxi)
    cdef object replay_special      # int32 positions of the nodes that are not scalar ops
    cdef Py_ssize_t n_lazy          # small vectors no node reads (RK_LAZY) ...
    cdef bint lazy_stale            # ... left stale by the last replay
    cdef dict elem_nodes            # array node id -> int32 array: its elements' node ids
    cdef Py_ssize_t en_array        # the last array indexed, and its entry's data
    cdef int32_t *en_ids
    cdef list oadj_cache            # the mixed sweep's object adjoints, all None between sweeps
    cdef dict fusion                # last node id -> FusedGroup (values-only replays)
    cdef dict native_runs           # scalar run start -> (start, stop, C function): compiled
    cdef object native_runs_lib     #   stretches of it (values-only replays), their library

    def __cinit__(self, Py_ssize_t capacity=256):
        if capacity < 16:
            capacity = 16
        self.n = 0
        if _spare.cap >= capacity:      # the last large tape's buffers: pages already mapped
            self.cap = _spare.cap
            self.op, self.a, self.b = _spare.op, _spare.a, _spare.b
            self.val, self.p0, self.p1 = _spare.val, _spare.p0, _spare.p1
            self.adj_cache, self.adj_cap = _spare.adj, _spare.adj_cap
            _spare.cap = 0
            _spare.adj, _spare.adj_cap = NULL, 0
        else:
            self.cap = capacity
            self.op = <int32_t *>malloc(capacity * sizeof(int32_t))
            self.a = <int32_t *>malloc(capacity * sizeof(int32_t))
            self.b = <int32_t *>malloc(capacity * sizeof(int32_t))
            self.val = <double *>malloc(capacity * sizeof(double))
            self.p0 = <double *>malloc(capacity * sizeof(double))
            self.p1 = <double *>malloc(capacity * sizeof(double))
        if not (self.op and self.a and self.b and self.val and self.p0 and self.p1):
            raise MemoryError("cannot allocate a tape")
        self.recs = []
        self.inputs = []
        self.en_array = -1
        self.en_ids = NULL

    def __dealloc__(self):
        if SPARE_MIN <= self.cap <= SPARE_MAX and self.cap > _spare.cap and self.op \
                and self.a and self.b and self.val and self.p0 and self.p1:
            spare_release()             # keep the larger set for the next tape
            _spare.op, _spare.a, _spare.b = self.op, self.a, self.b
            _spare.val, _spare.p0, _spare.p1 = self.val, self.p0, self.p1
            _spare.adj, _spare.adj_cap = self.adj_cache, self.adj_cap
            _spare.cap = self.cap
            return
        free(self.adj_cache)
        free(self.op); free(self.a); free(self.b)
        free(self.val); free(self.p0); free(self.p1)

    cdef int grow(self) except -1:
        cdef Py_ssize_t cap = self.cap * 2
        if cap >= 2147483647:
            raise MemoryError("a tape holds at most 2**31 - 1 nodes")
        self.op = <int32_t *>realloc(self.op, cap * sizeof(int32_t))
        self.a = <int32_t *>realloc(self.a, cap * sizeof(int32_t))
        self.b = <int32_t *>realloc(self.b, cap * sizeof(int32_t))
        self.val = <double *>realloc(self.val, cap * sizeof(double))
        self.p0 = <double *>realloc(self.p0, cap * sizeof(double))
        self.p1 = <double *>realloc(self.p1, cap * sizeof(double))
        if not (self.op and self.a and self.b and self.val and self.p0 and self.p1):
            raise MemoryError("cannot grow the tape")
        self.cap = cap
        return 0

    cdef inline Py_ssize_t push(self, int op, Py_ssize_t a, Py_ssize_t b,
                                double v, double d0, double d1) except -1:
        cdef Py_ssize_t i = self.n
        if i == self.cap:
            self.grow()
        self.op[i] = op
        self.a[i] = <int32_t>a
        self.b[i] = <int32_t>b
        self.val[i] = v
        self.p0[i] = d0
        self.p1[i] = d1
        self.n = i + 1
        return i

    cdef inline Tracer push_scalar(self, int op, Py_ssize_t a, Py_ssize_t b,
                                   double v, double d0, double d1):
        return new_tracer(self, self.push(op, a, b, v, d0, d1), v, None)

    cdef Py_ssize_t push_record(self, int op, Record rec, double v) except -1:
        self.recs.append(rec)
        if op == OP_OBJ:
            self.n_obj += 1
        return self.push(op, -1, -1, v, <double>(len(self.recs) - 1), 0.0)

    # ------------------------------------------------------------------
    # recording
    # ------------------------------------------------------------------
    def input(self, value):
        """Add an input leaf holding ``value``; returns its ``Tracer``."""
        cdef Py_ssize_t i
        cdef Record rec
        if is_fast_number(value) or (isinstance(value, np.ndarray)
                                     and value.ndim == 0 and value.dtype == np.float64):
            i = self.push(OP_INPUT, -1, -1, <double>float(value), 0.0, 0.0)
            self.inputs.append(i)
            return new_tracer(self, i, <double>float(value), None)
        rec = Record.__new__(Record)
        rec.prim = None
        rec.parents = ()
        rec.ans = value
        i = self.push_record(OP_OBJ, rec, _NAN)
        self.inputs.append(i)
        return new_tracer(self, i, 0.0, value)

    def input_many(self, list values):
        """``[self.input(v) for v in values]``, with a C loop for floats."""
        cdef list out = []
        cdef Py_ssize_t i
        cdef double d
        cdef Record rec
        for v in values:
            if type(v) is float or type(v) is _NP_F64:
                d = <double>v
                i = self.push(OP_INPUT, -1, -1, d, 0.0, 0.0)
                self.inputs.append(i)
                out.append(new_tracer(self, i, d, None))
            elif type(v) is np.ndarray and (<object>v).ndim:
                rec = Record.__new__(Record)          # an array leaf, as input() makes it
                rec.prim = None
                rec.parents = ()
                rec.ans = v
                i = self.push_record(OP_OBJ, rec, _NAN)
                self.inputs.append(i)
                out.append(new_tracer(self, i, 0.0, v))
            else:
                out.append(self.input(v))
        return out

    def process(self, prim, tuple args, tuple vals, ans, dict params):
        """Record primitive ``prim`` applied to ``args`` (boxed) / ``vals``."""
        return self._process(prim, args, vals, ans, params)

    cdef object _process(self, PrimitiveBase prim, tuple args, tuple vals, object ans,
                         dict params, object saved=None):
        cdef Record rec = Record.__new__(Record)
        cdef Py_ssize_t i, k, n = len(args)
        cdef list parents, consts
        cdef object x
        if n == 1:                      # the common arities without the lists
            x = args[0]
            if type(x) is Tracer and (<Tracer>x).tape is self:
                rec.parents, rec.consts = ((<Tracer>x).idx,), _ONE_NONE
            else:
                rec.parents, rec.consts = _ONE_CONST, vals
        elif n == 2 and type(args[0]) is Tracer and (<Tracer>args[0]).tape is self:
            x = args[1]
            if type(x) is Tracer and (<Tracer>x).tape is self:
                rec.parents = ((<Tracer>args[0]).idx, (<Tracer>x).idx)
                rec.consts = _TWO_NONE
            else:
                rec.parents = ((<Tracer>args[0]).idx, -1)
                rec.consts = (None, vals[1])
        else:
            parents, consts = [], []
            for k in range(n):
                x = args[k]
                if type(x) is Tracer and (<Tracer>x).tape is self:
                    parents.append((<Tracer>x).idx)
                    consts.append(None)
                else:
                    parents.append(-1)
                    consts.append(vals[k])
            rec.parents = tuple(parents)
            rec.consts = tuple(consts)
        rec.prim = prim
        rec.params = params
        rec.saved = prim_save(prim, vals, ans) if saved is None else saved
        if type(ans) is np.ndarray:
            if arr_ndim(ans) != 0 or (<object>ans).dtype is not _FLOAT64:
                rec.ans = ans           # an array node (the common case of array code)
                i = self.push_record(OP_OBJ, rec, _NAN)
                return new_tracer(self, i, 0.0, ans)
            ans = float(ans)
        rec.ans = ans
        if isinstance(ans, float):
            i = self.push_record(OP_OBJ, rec, ans)
            return new_tracer(self, i, ans, None)
        i = self.push_record(OP_OBJ, rec, _NAN)
        return new_tracer(self, i, 0.0, ans)

    def guard_value(self, x, fn, result, str what):
        """Record that ``fn(value of x) == result`` decided something (an index
        from argmax, a permutation from argsort); replay re-checks it."""
        cdef Record rec
        if not (type(x) is Tracer and (<Tracer>x).tape is self):
            return
        rec = Record.__new__(Record)
        rec.prim = None
        rec.info = ("fn", (<Tracer>x).idx, fn, result, what)
        self.push_record(OP_GUARD, rec, 0.0)

    def comparison_guards(self):
        """The guards this tape holds: ``None`` for each that is not a comparison
        of values (a ``guard_value``), else ``(node, code, x node, y node, x, y,
        result)`` (code 0-5: < <= > >= == !=; node -1 for an operand that is not
        a node of this tape, whose value ``x``/``y`` then is), in tape order --
        for compilers of loop conditions."""
        cdef Py_ssize_t i
        out = []
        for i in range(self.n):
            if self.op[i] == OP_GUARD:
                info = (<Record>self.recs[<Py_ssize_t>self.p0[i]]).info
                out.append((i,) + tuple(info) if type(info[0]) is int else None)
        return out

    cdef guard(self, int code, object x, object y, object result):
        cdef Record rec = Record.__new__(Record)
        rec.prim = None
        rec.info = (code,
                    (<Tracer>x).idx if type(x) is Tracer and (<Tracer>x).tape is self else -1,
                    (<Tracer>y).idx if type(y) is Tracer and (<Tracer>y).tape is self else -1,
                    concrete(x), concrete(y), result)
        self.push_record(OP_GUARD, rec, 0.0)

    # ------------------------------------------------------------------
    # introspection
    # ------------------------------------------------------------------
    @property
    def n_object_nodes(self):
        """Nodes that hold an array (or another object) value: inputs and
        primitives' results; a tape without any is scalar nodes only."""
        return self.n_obj

    @property
    def n_nodes(self):
        return self.n

    cpdef object value(self, Py_ssize_t i):
        """The value of node ``i`` (float or object)."""
        if i < 0 or i >= self.n:
            raise IndexError(f"node {i} is not on this tape of {self.n} nodes")
        if self.op[i] == OP_OBJ:
            if self.lazy_stale:
                settle_lazy(self, i)
            return (<Record>self.recs[<Py_ssize_t>self.p0[i]]).ans
        return self.val[i]

    def node_constants(self):
        """Each constant op's constant (float64; 0 for the other nodes), for
        compilers of the tape's scalar code."""
        cdef Py_ssize_t i, n = self.n
        out = np.zeros(n, dtype=np.float64)
        cdef double[::1] ov = out
        for i in range(n):
            if FIRST_CONST <= self.op[i] < FIRST_UNARY:
                ov[i] = self.p1[i]
        return out

    def set_native_runs(self, runs, library):
        """Run stretches of scalar nodes through compiled functions in
        values-only replays (``evaluate``, ``replay(partials=False)``).

        ``runs``: ``(run_start, start, stop, address)`` tuples, where
        ``run_start`` begins a maximal run of scalar nodes that holds nodes
        ``start .. stop-1`` (stretches of one run in order, not overlapping),
        and ``address`` is a C function ``void f(double *val)`` that writes
        those nodes' values into the tape's value array from the values
        before them (as ``tapead.compiler.runs`` generates, with the
        interpreter's bits); ``library`` keeps the functions loaded.
        ``set_native_runs([], None)`` undoes it."""
        cdef Py_ssize_t rs, st, sp, i
        table = {}
        for rs, st, sp, addr in runs:
            if not (0 <= rs <= st < sp <= self.n) or not addr:
                raise ValueError(f"set_native_runs: ({rs}, {st}, {sp}) is not a stretch "
                                 "of this tape with a function")
            if rs > 0 and self.op[rs - 1] >= FIRST_BINARY:
                raise ValueError(f"set_native_runs: node {rs} does not begin a run")
            for i in range(rs, sp):
                if self.op[i] < FIRST_BINARY:
                    raise ValueError(f"set_native_runs: node {i} is not a scalar node")
            prev = table.setdefault(rs, [])
            if prev and st < prev[len(prev) - 1][1]:   # (no negative indices here)
                raise ValueError("set_native_runs: the stretches of a run overlap or are "
                                 "out of order")
            prev.append((st, sp, <Py_ssize_t> addr))
        self.native_runs = {k: tuple(v) for k, v in table.items()} or None
        self.native_runs_lib = library if table else None

    def reads(self, Py_ssize_t i):
        """The node ids node ``i``'s value is computed from (what a replay reads)."""
        cdef int o
        if i < 0 or i >= self.n:
            raise IndexError(f"node {i} is not on this tape of {self.n} nodes")
        o = self.op[i]
        if o == OP_OBJ or o == OP_GUARD:
            return tuple(k for k in _record_reads(<Record>self.recs[<Py_ssize_t>self.p0[i]])
                         if k >= 0)
        if o == OP_ELEM:
            return (self.a[i],)
        if FIRST_BINARY <= o < FIRST_CONST:
            return (self.a[i], self.b[i])
        if o >= FIRST_CONST:
            return (self.a[i],)
        return ()

    def set_fusion(self, groups, skip=()):
        """Evaluate these ``FusedGroup``s in one pass each in values-only
        replays (``evaluate``, ``replay(partials=False)``): a group runs at
        its last node and its other nodes are skipped, so only the nodes it
        writes out get new values.  Every member must be an object node, in
        no other group, and every node outside a group that reads a member
        must come after the group's last node and read a written-out one
        (``tapead.compiler.fusion`` plans groups so).  The object nodes in
        ``skip`` (nodes no output or guard depends on) are not evaluated at
        all.  Pass ``[]`` to undo."""
        cdef unsigned char *kd
        cdef Py_ssize_t i
        _replay_kinds(self)
        kd = <unsigned char *>(<char *>self.replay_kinds)
        for i in range(self.n):
            if kd[i] == RK_FUSED_SKIP or kd[i] == RK_FUSED_RUN:
                kd[i] = RK_PYTHON
        self.fusion = {}
        seen = set()
        for g in groups:
            if not isinstance(g, FusedGroup):
                raise TypeError(f"set_fusion: {g!r} is not a FusedGroup")
            members = (<FusedGroup>g).members
            for i in members:
                if not (0 <= i < self.n) or self.op[i] != OP_OBJ or kd[i] != RK_PYTHON \
                        or i in seen or (<Record>self.recs[<Py_ssize_t>self.p0[i]]).prim is None:
                    raise ValueError(f"set_fusion: node {i} cannot be a member of a group")
                seen.add(i)
        skipped = []
        for i in skip:
            if not (0 <= i < self.n) or self.op[i] != OP_OBJ or i in seen or \
                    (<Record>self.recs[<Py_ssize_t>self.p0[i]]).prim is None:
                raise ValueError(f"set_fusion: node {i} cannot be skipped")
            seen.add(i)
            if kd[i] == RK_PYTHON:          # (small-vector packs stay: they are C already)
                skipped.append(i)
        for i in skipped:
            kd[i] = RK_FUSED_SKIP
        for g in groups:
            members = (<FusedGroup>g).members
            for i in members:
                kd[i] = RK_FUSED_SKIP
            i = members[len(members) - 1]
            kd[i] = RK_FUSED_RUN
            self.fusion[i] = g

    @property
    def n_fused_groups(self):
        """How many fused groups values-only replays run (``set_fusion``)."""
        return len(self.fusion) if self.fusion else 0

    def is_scalar_node(self, Py_ssize_t i):
        """Whether node ``i`` holds an unboxed float (its ``value`` is a float)."""
        if i < 0 or i >= self.n:
            raise IndexError(f"node {i} is not on this tape of {self.n} nodes")
        return self.op[i] != OP_OBJ

    def node(self, Py_ssize_t i):
        """(opcode, a, b, value, p0, p1) of node ``i``, for tests and docs."""
        if i < 0 or i >= self.n:
            raise IndexError(f"node {i} is not on this tape of {self.n} nodes")
        return (self.op[i], self.a[i], self.b[i], self.val[i], self.p0[i], self.p1[i])

    def export_nodes(self):
        """(op, a, b) of every node as int32 numpy arrays (copies), for passes
        over the tape's structure such as sparsity propagation."""
        cdef Py_ssize_t n = self.n
        op = np.empty(n, dtype=np.int32)
        a = np.empty(n, dtype=np.int32)
        b = np.empty(n, dtype=np.int32)
        cdef int32_t[::1] ov = op, av = a, bv = b
        if n:
            memcpy(&ov[0], self.op, n * sizeof(int32_t))
            memcpy(&av[0], self.a, n * sizeof(int32_t))
            memcpy(&bv[0], self.b, n * sizeof(int32_t))
        return op, a, b

    def record(self, Py_ssize_t i):
        """The ``Record`` of object node ``i``."""
        if i < 0 or i >= self.n:
            raise IndexError(f"node {i} is not on this tape of {self.n} nodes")
        if self.op[i] not in (OP_OBJ, OP_GUARD):
            raise ValueError(f"node {i} is a scalar node; it has no record")
        settle_lazy(self, i)
        return self.recs[<Py_ssize_t>self.p0[i]]

    def memory(self):
        """Bytes held, by kind.

        Returns a dict: ``values`` (numbers kept for the reverse sweep:
        scalar nodes' value and two partials, object nodes' values except
        inputs, and residuals saved by rules -- each distinct array counted
        once), ``index`` (opcode and operand ids of every node, plus the
        value/partial slots of object nodes, and which node is each array
        element read by ``x[i]``) and ``total``.
        """
        cdef Py_ssize_t i, n_scalar = 0
        cdef Record rec
        seen = set()
        values = 0
        for i in range(self.n):
            if self.op[i] >= FIRST_BINARY or self.op[i] == OP_ELEM:
                n_scalar += 1
        values += n_scalar * 3 * sizeof(double)

        def count(obj):
            nonlocal values
            if obj is None:
                return
            if isinstance(obj, np.ndarray):
                base = obj
                if id(base) not in seen:
                    seen.add(id(base))
                    values += base.nbytes
            elif isinstance(obj, (float, np.floating)):
                if id(obj) not in seen:
                    seen.add(id(obj))
                    values += 8 if isinstance(obj, float) else obj.nbytes
            elif isinstance(obj, (tuple, list)):
                for o in obj:
                    count(o)
        for i in range(self.n):
            if self.op[i] == OP_OBJ:
                rec = <Record>self.recs[<Py_ssize_t>self.p0[i]]
                if rec.prim is not None:
                    count(rec.ans)
                    count(rec.saved)
        index = self.n * SCALAR_NODE_BYTES - n_scalar * 3 * sizeof(double)
        if self.elem_nodes:         # which node is each element read (x[i])
            for ent in self.elem_nodes.values():
                index += ent.nbytes if type(ent) is np.ndarray else 64 * len(ent)
        return {"values": values, "index": index, "total": values + index}

    @property
    def nbytes(self):
        """Bytes of numbers the tape holds for its reverse sweep (see ``memory``)."""
        return self.memory()["values"]

    bytes_per_scalar_node = SCALAR_NODE_BYTES

    # ------------------------------------------------------------------
    # reverse sweep
    # ------------------------------------------------------------------
    def backward(self, outputs, seeds, wrt, bint dense=False):
        """Reverse sweep.

        Parameters
        ----------
        outputs : sequence of int
            Node ids to seed.
        seeds : sequence
            Adjoint seed of each output (float, array or box), same shapes.
        wrt : sequence of int
            Node ids whose adjoints are returned.
        dense : bool
            When every node of the tape is a scalar node, return the
            adjoints as one float64 array (filled in C).

        Returns
        -------
        list
            The adjoint of each ``wrt`` node: a float (scalar nodes), an
            array or box, or ``None`` where nothing reached it.

        The steps: the highest output (``_top_output``), a zeroed float
        adjoint per node (``_adjoint_buffer``), the float seeds, then either
        the all-scalar sweep in C without the GIL (``sweep_scalar``) or the
        mixed sweep (``sweep_mixed`` in _core_sweep.pxi: object adjoints beside
        the float ones) and the adjoints read back (``read_adjoints``).
        """
        cdef Py_ssize_t top = self._top_output(outputs), i, steps = 0, nn = self.n
        cdef double *buf
        cdef double *adj
        cdef unsigned char *hobj = NULL
        cdef list oadj = None
        cdef bint all_fast = True
        self._check_partials("backward")
        _check_node_ids(wrt, nn, "wrt")
        if self.lazy_stale:         # a seeded small vector's rule may read its value
            for i in outputs:
                settle_lazy(self, i)
        cdef bint cached = not self.sweeping
        buf = self._adjoint_buffer(cached)
        adj = buf + 1
        self.sweeping = True
        try:
            for i, s in zip(outputs, seeds):
                if isinstance(s, float) or type(s) is int:
                    adj[i] += <double>s
                else:
                    all_fast = False
            if all_fast and self.n_obj == 0:
                if top >= NOGIL_SWEEP:      # a short sweep costs less than releasing the GIL
                    with nogil:
                        sweep_scalar(self.op, self.a, self.b, self.p0, self.p1, adj, top,
                                     &steps)
                else:
                    sweep_scalar(self.op, self.a, self.b, self.p0, self.p1, adj, top, &steps)
                self.last_sweep_steps = steps
                if dense:
                    return _gather(adj, wrt)
                return [adj[i] for i in wrt]
            hobj = <unsigned char *>calloc(nn + 1, 1)
            if hobj == NULL:
                raise MemoryError("cannot allocate the adjoint buffer")
            hobj += 1
            if cached and self.oadj_cache is not None and len(self.oadj_cache) == nn + 1:
                oadj = self.oadj_cache   # all None: the last sweep cleared what it set
            else:
                oadj = [None] * (nn + 1)     # slot nn is unused
                if cached:
                    self.oadj_cache = oadj
            for i, s in zip(outputs, seeds):
                if not (isinstance(s, float) or type(s) is int):
                    _accumulate(i, s, adj, hobj, oadj)
            self.last_sweep_steps = sweep_mixed(self, top, adj, hobj, oadj)
            return read_adjoints(self, wrt, adj, hobj, oadj)
        finally:
            if cached:
                self.sweeping = False
            else:
                free(buf)
            if hobj != NULL:
                if oadj is not None and oadj is self.oadj_cache:
                    _clear_object_adjoints(oadj, hobj, nn)
                free(hobj - 1)

    cdef Py_ssize_t _top_output(self, outputs) except -2:
        """The highest output node id (-1 for none); refuses ids off the tape."""
        cdef Py_ssize_t top = -1, i
        for i in outputs:
            if i < 0 or i >= self.n:
                raise IndexError(f"output node {i} is not on this tape")
            if i > top:
                top = i
        return top

    cdef double *_adjoint_buffer(self, bint cached) except NULL:
        """n + 1 zeroed doubles (slot 0 absorbs constant operands, id -1): the
        tape's cached buffer when no sweep is running (repeated sweeps touch
        warm pages), else a fresh one the caller frees."""
        cdef Py_ssize_t nn = self.n
        cdef double *buf
        if cached:
            if self.adj_cap < nn + 1:
                free(self.adj_cache)
                self.adj_cache = <double *>malloc((nn + 1) * sizeof(double))
                self.adj_cap = nn + 1 if self.adj_cache != NULL else 0
            buf = self.adj_cache
            if buf != NULL:
                memset(buf, 0, (nn + 1) * sizeof(double))
        else:
            buf = <double *>calloc(nn + 1, sizeof(double))
        if buf == NULL:
            raise MemoryError("cannot allocate the adjoint buffer")
        return buf

    cdef bint _is_complex_node(self, Py_ssize_t i):
        if self.op[i] == OP_OBJ or self.op[i] == OP_INPUT:
            return is_complex_value(self.value(i))
        return False

    cdef bint _is_scalar(self, Py_ssize_t i):
        if self.op[i] == OP_OBJ:
            return isinstance((<Record>self.recs[<Py_ssize_t>self.p0[i]]).ans, float)
        return True

    # ------------------------------------------------------------------
    # K-direction forward sweep and replay (bodies in _core_replay.pxi)
    # ------------------------------------------------------------------
    def forward_sweep(self, seeds, outputs, Py_ssize_t K):
        """Push K tangent directions through the tape at once.

        Parameters
        ----------
        seeds : dict
            node id -> tangent with a leading axis of length K.
        outputs : sequence of int
            Node ids whose tangents are returned.
        K : int
            Number of directions.

        Returns
        -------
        list
            Tangent of each output, shape ``(K,) + shape``, or ``None``
            where no direction reaches it.

        Scalar nodes run in C: row ``i`` of the tangent table is
        ``p0 * row a + p1 * row b``, so each local partial is computed once
        for all K directions.  Object nodes call their primitive's batched
        JVP (``prim.jvp_batched``) or, lacking one, its JVP once per
        direction.
        """
        self._check_partials("forward_sweep")
        settle_all_lazy(self)       # its JVP rules read object nodes' values
        return tape_forward_sweep(self, seeds, outputs, K)

    def replay(self, new_inputs, bint partials=True):
        """Re-evaluate every node at new input values, without Python tracing.

        ``partials=False`` computes the values only (no local partials, no
        saved residuals): faster, for a tape used as a program; the sweeps
        then refuse the tape until a full replay.  Long runs of scalar nodes
        are replayed in C without the GIL.

        Raises ``GuardFlippedError`` when a recorded comparison (or a guarded
        index output) comes out differently: the recorded program would not be
        the one that runs.
        """
        tape_replay(self, new_inputs, partials)

    def evaluate(self, new_inputs, outputs, spread=None):
        """The values of nodes ``outputs`` at new inputs (a values-only replay).

        The fast entry for calling a recorded program: each input must be of
        its recorded kind exactly (a float or 0-d float64 array for a scalar
        input, an ndarray of the recorded shape and dtype for an array one),
        else it returns ``None`` with the tape untouched, for the caller to
        convert and check.  Array inputs are kept by reference.

        Parameters
        ----------
        new_inputs : sequence
            One value per recorded input (see ``spread``).
        outputs : sequence of int
            Node ids; a negative id gives ``None``.
        spread : sequence of int, optional
            One count per value: 0 for a value that is one input, m > 0 for
            a float64 array of m elements that fill the next m scalar inputs
            (C order) -- an array fed to the tape element by element.

        Returns
        -------
        list or None
            The value of each output (float for scalar nodes, the object
            otherwise), or ``None``.
        """
        return tape_evaluate(self, new_inputs, outputs, spread)

    cdef int _check_partials(self, str what) except -1:
        if self.partials_stale:
            raise TapeReplayError(
                f"Tape.{what}: the last replay computed values only (Tape.evaluate or "
                "replay(..., partials=False)) or stopped at an error, so the local "
                "partials are stale; call Tape.replay(inputs) first")
        return 0
