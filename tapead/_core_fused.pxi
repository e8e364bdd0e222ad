# Fused elementwise kernels (included by _core.pyx): one pass over memory
# where numpy would make two, for the forward rules that keep a partner value
# for the reverse pass.
#
# ``sin_with_cos(x)`` computes sin(x) and cos(x) of a float64 array in one C
# loop (glibc's ``sincos``: one range reduction for both).  The values must be
# numpy's bit for bit, so the first call compares the kernel with np.sin and
# np.cos on a probe array spanning small, large and special arguments; when
# they differ in any bit (a numpy built with its own vectorised sine), the
# kernels return None and the callers use numpy.

cdef extern from "_core_fused.h" nogil:
    void tapead_sincos(double x, double *s, double *c)
    void tapead_mul_tangent(const double *tx, const double *y, const double *ty,
                            const double *x, double *out, long n)
    void tapead_tanh_vjp(const double *a, const double *g, double *out, long n)
    void tapead_tanh_vjp_f(const float *a, const float *g, float *out, long n)
    void tapead_pow_tangent(const double *tx, const double *x, double *out, long n, int k)
    void tapead_pow_partial_dual(const double *x, const double *tx, double *val,
                                 double *tan, long n, int k)
    void tapead_sgd_step(double *p, const double *g, double lr, long n)
    void tapead_sgd_step_f(float *p, const float *g, float lr, long n)
    void tapead_sum_rows(const double *g, double *out, long rows, long n)
    void tapead_sum_rows_f(const float *g, float *out, long rows, long n)

cdef enum:
    SINCOS_NOGIL = 4096          # release the GIL from this many elements on


cdef void sincos_loop(const double *x, double *s, double *c, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        tapead_sincos(x[i], &s[i], &c[i])


cdef tuple _sincos_raw(object x):
    """(sin x, cos x) of a C-contiguous float64 array with at least one dimension."""
    cdef object s = np.empty_like(x), c = np.empty_like(x)
    cdef Py_ssize_t n = (<object>x).size
    if n == 0:
        return s, c
    cdef const double[::1] xv = (<object>x).reshape(-1)
    cdef double[::1] sv = s.reshape(-1), cv = c.reshape(-1)
    if n >= SINCOS_NOGIL:
        with nogil:
            sincos_loop(&xv[0], &sv[0], &cv[0], n)
    else:
        sincos_loop(&xv[0], &sv[0], &cv[0], n)
    return s, c


cdef int _sincos_state = -1       # -1 not checked yet, 0 numpy differs, 1 identical


cdef bint _sincos_matches_numpy():
    """Whether the kernel gives np.sin's and np.cos's bits on a probe array."""
    global _sincos_state
    if _sincos_state < 0:
        rng = np.random.default_rng(12345)
        probe = np.concatenate([
            rng.uniform(-1.0, 1.0, 2048), rng.uniform(-100.0, 100.0, 2048),
            rng.standard_normal(1024) * 1e6, rng.standard_normal(256) * 1e200,
            np.array([0.0, -0.0, 1e-310, -1e-310, np.pi, -np.pi / 2, 1e22,
                      np.inf, -np.inf, np.nan, 5e-324])])
        with np.errstate(all="ignore"):
            s, c = _sincos_raw(probe)
            ok = (np.array_equal(s, np.sin(probe), equal_nan=True)
                  and np.array_equal(c, np.cos(probe), equal_nan=True)
                  and np.array_equal(np.signbit(s), np.signbit(np.sin(probe))))
        _sincos_state = 1 if ok else 0
    return _sincos_state == 1


cdef inline bint _sincos_fits(object x):
    return (type(x) is np.ndarray and (<object>x).dtype is _FLOAT64
            and (<object>x).ndim > 0 and (<object>x).flags.c_contiguous)


def sin_with_cos(x):
    """``(np.sin(x), np.cos(x))`` in one pass, or None.

    Parameters
    ----------
    x : ndarray
        float64, C-contiguous, at least one dimension; anything else gives
        None (the caller uses numpy).

    Returns
    -------
    tuple of two ndarrays of x's shape, or None
        Bit-identical to numpy's ``sin`` and ``cos`` (checked once per process
        against numpy; None when they differ on this build).
    """
    if not _sincos_fits(x) or not _sincos_matches_numpy():
        return None
    return _sincos_raw(x)


def sincos_kernel_active():
    """Whether ``sin_with_cos`` is in use (its values match numpy's here)."""
    return _sincos_matches_numpy()


# --------------------------------------------------------------------------
# forward mode: the tangent of a product of two dual arrays in one pass
# --------------------------------------------------------------------------

cdef enum:
    FUSED_JVP_MUL = 1           # x * y: tx * y + ty * x
    FUSED_JVP_POW = 2           # x ** 3, x ** 4 (constant exponent): tx * (k x**(k-1))


cdef inline bint _plain_f64(object a, object like):
    return (type(a) is np.ndarray and arr_type(a) == cnp.NPY_DOUBLE
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>a)
            and cnp.PyArray_SAMESHAPE(<cnp.ndarray>a, <cnp.ndarray>like))


cdef object mul_tangent(object tx, object y, object ty, object x):
    """tx * y + ty * x for float64 C-contiguous arrays of one shape (else None):
    numpy's three passes in one, bit for bit."""
    if not (type(x) is np.ndarray and arr_type(x) == cnp.NPY_DOUBLE
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>x)):
        return None
    if not (_plain_f64(tx, x) and _plain_f64(y, x) and _plain_f64(ty, x)):
        return None
    out = np.empty_like(x)
    cdef Py_ssize_t n = (<object>x).size
    if n == 0:
        return out
    cdef const double[::1] txv = tx.reshape(-1), yv = y.reshape(-1), tyv = ty.reshape(-1)
    cdef const double[::1] xv = x.reshape(-1)
    cdef double[::1] ov = out.reshape(-1)
    with nogil:
        tapead_mul_tangent(&txv[0], &yv[0], &tyv[0], &xv[0], &ov[0], n)
    return out


def fused_mul_tangent(tx, y, ty, x):
    """``tx * y + ty * x`` in one pass for float64 C-contiguous arrays of one
    shape, else None (the tangent of ``x * y`` for dual numbers)."""
    return mul_tangent(tx, y, ty, x)


# --------------------------------------------------------------------------
# reverse mode: the cotangent of tanh from its output
# --------------------------------------------------------------------------

cdef object tanh_vjp(object a, object g):
    """(1 - a*a) * g for C-contiguous arrays a, g of one shape and dtype
    (float64 or float32) in one pass, numpy's three roundings; else None."""
    cdef int t = arr_type(a)
    if not ((t == cnp.NPY_DOUBLE or t == cnp.NPY_FLOAT) and arr_type(g) == t
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>a)
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>g)
            and cnp.PyArray_SAMESHAPE(<cnp.ndarray>a, <cnp.ndarray>g)):
        return None
    out = np.empty_like(a)
    cdef Py_ssize_t n = (<object>a).size
    if n == 0:
        return out
    if t == cnp.NPY_DOUBLE:
        if n >= SINCOS_NOGIL:
            with nogil:
                tapead_tanh_vjp(<const double *>cnp.PyArray_DATA(<cnp.ndarray>a),
                                <const double *>cnp.PyArray_DATA(<cnp.ndarray>g),
                                <double *>cnp.PyArray_DATA(<cnp.ndarray>out), n)
        else:
            tapead_tanh_vjp(<const double *>cnp.PyArray_DATA(<cnp.ndarray>a),
                            <const double *>cnp.PyArray_DATA(<cnp.ndarray>g),
                            <double *>cnp.PyArray_DATA(<cnp.ndarray>out), n)
    else:
        tapead_tanh_vjp_f(<const float *>cnp.PyArray_DATA(<cnp.ndarray>a),
                          <const float *>cnp.PyArray_DATA(<cnp.ndarray>g),
                          <float *>cnp.PyArray_DATA(<cnp.ndarray>out), n)
    return out


cdef object sum_leading(object g, Py_ssize_t lead):
    """``np.add.reduce(g, axis=tuple(range(lead)))`` of a C-contiguous float64 or
    float32 ndarray in one C pass, numpy's bits (0.0, then the rows added in
    order), when the kept axes hold at least two elements; else None (numpy
    sums a single column pairwise)."""
    cdef int t = arr_type(g), k, nd = arr_ndim(g)
    cdef cnp.npy_intp *dims = cnp.PyArray_DIMS(<cnp.ndarray>g)
    cdef Py_ssize_t rows = 1, inner = 1
    if not ((t == cnp.NPY_DOUBLE or t == cnp.NPY_FLOAT) and 0 < lead <= nd
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>g)):
        return None
    for k in range(lead):
        rows *= dims[k]
    for k in range(lead, nd):
        inner *= dims[k]
    if inner < 2:
        return None
    out = cnp.PyArray_EMPTY(nd - lead, dims + lead, t, 0)
    if t == cnp.NPY_DOUBLE:
        tapead_sum_rows(<const double *>cnp.PyArray_DATA(<cnp.ndarray>g),
                        <double *>cnp.PyArray_DATA(<cnp.ndarray>out), rows, inner)
    else:
        tapead_sum_rows_f(<const float *>cnp.PyArray_DATA(<cnp.ndarray>g),
                          <float *>cnp.PyArray_DATA(<cnp.ndarray>out), rows, inner)
    return out


def fused_sum_leading(g, int lead):
    """``np.add.reduce(g, axis=tuple(range(lead)))`` in one C pass (numpy's bits)
    for C-contiguous float64/float32 arrays whose kept axes hold >= 2 elements,
    else None: the cotangent of a bias broadcast along ``lead`` leading axes."""
    return sum_leading(g, lead)


def fused_tanh_vjp(a, g):
    """``(1 - a*a) * g`` in one pass (the cotangent of tanh from its output ``a``)
    for C-contiguous float64 or float32 arrays of one shape, else None."""
    if type(a) is not np.ndarray or type(g) is not np.ndarray:
        return None
    return tanh_vjp(a, g)


cdef inline int _small_power(object y) noexcept:
    """3 or 4 for a Python int or float exponent equal to it, else 0."""
    if type(y) is int or type(y) is float:
        if y == 3:
            return 3
        if y == 4:
            return 4
    return 0


cdef object pow_tangent(object tx, object x, object y):
    """The tangent of x ** y for y = 3 or 4 (Python numbers) and float64
    C-contiguous arrays tx, x of one shape: tx * (y x**(y-1)) in one pass,
    the rule's roundings (else None)."""
    cdef int k = _small_power(y)
    if k == 0 or not (type(x) is np.ndarray and arr_type(x) == cnp.NPY_DOUBLE
                      and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>x)
                      and _plain_f64(tx, x)):
        return None
    out = np.empty_like(x)
    cdef Py_ssize_t n = (<object>x).size
    if n == 0:
        return out
    cdef const double[::1] txv = tx.reshape(-1), xv = x.reshape(-1)
    cdef double[::1] ov = out.reshape(-1)
    with nogil:
        tapead_pow_tangent(&txv[0], &xv[0], &ov[0], n, k)
    return out


def fused_pow_tangent(tx, x, y):
    """``tx * (y * x**(y-1))`` for ``y`` 3 or 4 in one pass (float64 C-contiguous
    arrays of one shape), else None: the tangent of ``x ** y``."""
    return pow_tangent(tx, x, y)


def pow_partial_dual(x, y):
    """``y * x**(y-1)`` of a dual number ``x`` of float64 C-contiguous arrays,
    for ``y`` 3 or 4, in one pass (value and tangent with the roundings of the
    dual products ``4.0 * (x*x*x)`` / ``3.0 * (x*x)``); None for anything else.

    Parameters
    ----------
    x : Dual
        Primal and tangent float64 C-contiguous arrays of one shape.
    y : int or float

    Returns
    -------
    Dual or None
    """
    cdef int k = _small_power(y)
    cdef Dual d
    if k == 0 or type(x) is not Dual:
        return None
    d = <Dual>x
    p, t = d.op, d.ot
    if not (type(p) is np.ndarray and arr_type(p) == cnp.NPY_DOUBLE
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>p) and arr_ndim(p) > 0
            and _plain_f64(t, p)):
        return None
    val = np.empty_like(p)
    tan = np.empty_like(p)
    cdef Py_ssize_t n = (<object>p).size
    if n == 0:
        return new_dual(d.ftrace, 0.0, 0.0, val, tan)
    cdef const double[::1] pv = p.reshape(-1), tv = t.reshape(-1)
    cdef double[::1] vv = val.reshape(-1), wv = tan.reshape(-1)
    with nogil:
        tapead_pow_partial_dual(&pv[0], &tv[0], &vv[0], &wv[0], n, k)
    return new_dual(d.ftrace, 0.0, 0.0, val, tan)


FUSED_JVP = {"mul": FUSED_JVP_MUL, "pow": FUSED_JVP_POW}


# --------------------------------------------------------------------------
# optimizers: the SGD update in place
# --------------------------------------------------------------------------

cdef bint _sgd_in_c(object p, object g, object lr) noexcept:
    """Whether ``p -= lr * g`` can run in one C pass with numpy's roundings:
    writeable C-contiguous float64/float32 arrays of one shape and dtype that
    do not partly overlap, and a Python float ``lr`` (also an int or a numpy
    float64 for float64 arrays; for float32 numpy rounds a Python float to
    float32, while a float64 scalar would make it compute in float64)."""
    cdef int t
    cdef char *pp
    cdef char *gp
    cdef Py_ssize_t nb
    if type(p) is not np.ndarray or type(g) is not np.ndarray:
        return False                    # subclasses (memmap, ...) take numpy's -=
    t = arr_type(p)
    if not ((t == cnp.NPY_DOUBLE or t == cnp.NPY_FLOAT) and arr_type(g) == t
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>p)
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>g)
            and cnp.PyArray_ISWRITEABLE(<cnp.ndarray>p)
            and cnp.PyArray_SAMESHAPE(<cnp.ndarray>p, <cnp.ndarray>g)):
        return False
    if type(lr) is not float and not (t == cnp.NPY_DOUBLE and (type(lr) is int
                                                             or type(lr) is np.float64)):
        return False
    pp = <char *>cnp.PyArray_DATA(<cnp.ndarray>p)
    gp = <char *>cnp.PyArray_DATA(<cnp.ndarray>g)
    nb = cnp.PyArray_NBYTES(<cnp.ndarray>p)
    return pp == gp or pp + nb <= gp or gp + nb <= pp


def sgd_step(list params, list grads, lr):
    """``p -= lr * g`` in place for each pair of ``params`` and ``grads``.

    Float64 and float32 C-contiguous arrays of one shape and dtype take one C
    pass each (the product rounded before the difference: numpy's bits);
    other arrays (strided, other dtypes, ndarray subclasses) take numpy's
    ``p -= lr * g``.  Every pair is checked before
    any array is changed.

    Parameters
    ----------
    params : list of ndarray
        Updated in place (writeable arrays).
    grads : list of ndarray or numbers
        The same length; array gradients have their parameter's shape.
    lr : float

    Returns
    -------
    bool
        False, with nothing changed, when some parameter is not a numpy
        array (the caller decides what that means); else True.

    Raises
    ------
    ValueError
        The lists differ in length, or a gradient's shape is not its
        parameter's.
    """
    cdef Py_ssize_t i, n = len(params), size
    cdef object p, g
    cdef double lr_d
    if len(grads) != n:
        raise ValueError(f"sgd_step: {n} parameters but {len(grads)} gradients; give one "
                         "gradient per parameter (ta.grad of the loss with respect to them)")
    for i in range(n):
        p = params[i]
        g = grads[i]
        if not isinstance(p, np.ndarray):
            return False
        if not cnp.PyArray_ISWRITEABLE(<cnp.ndarray>p):
            raise ValueError(f"sgd_step: parameter {i} is a read-only array; pass "
                             "writeable arrays (e.g. a copy) to update them in place")
        if type(g) is np.ndarray:
            if not cnp.PyArray_SAMESHAPE(<cnp.ndarray>p, <cnp.ndarray>g):
                raise ValueError(
                    f"sgd_step: parameter {i} has shape {(<object>p).shape} but its "
                    f"gradient has shape {(<object>g).shape}; pass the gradient of the "
                    "loss with respect to these parameters")
        elif (<object>p).ndim:
            raise ValueError(
                f"sgd_step: parameter {i} has shape {(<object>p).shape} but its gradient "
                f"is {type(g).__name__} {g!r}; pass the gradient of the loss with "
                "respect to these parameters")
    lr_d = <double>lr if (type(lr) is float or type(lr) is int
                          or type(lr) is np.float64) else 0.0
    for i in range(n):
        p = params[i]
        g = grads[i]
        if not _sgd_in_c(p, g, lr):
            p -= lr * g                 # numpy, in place (casts, overlaps, strides)
            continue
        size = cnp.PyArray_SIZE(<cnp.ndarray>p)
        if size == 0:
            continue
        if arr_type(p) == cnp.NPY_DOUBLE:
            tapead_sgd_step(<double *>cnp.PyArray_DATA(<cnp.ndarray>p),
                            <const double *>cnp.PyArray_DATA(<cnp.ndarray>g), lr_d, size)
        else:
            tapead_sgd_step_f(<float *>cnp.PyArray_DATA(<cnp.ndarray>p),
                              <const float *>cnp.PyArray_DATA(<cnp.ndarray>g),
                              <float>lr_d, size)
    return True
