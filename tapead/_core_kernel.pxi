# Scalar opcodes and their one C kernel (included by _core.pyx).
#
# ``scalar_eval`` is the single place where a scalar primitive's value and
# local partial derivatives are computed.  Recording (reverse mode), tape
# replay and dual numbers (forward mode) all call it, so the three cannot
# disagree.  The Python rule table (tapead/_prims) states the same
# derivatives as numpy expressions for arrays and nested transforms; the
# test suite checks the two against each other to 1e-15.

from libc.math cimport (
    sin as c_sin,
    cos as c_cos,
    tan as c_tan,
    exp as c_exp,
    log as c_log,
    log1p as c_log1p,
    expm1 as c_expm1,
    sqrt as c_sqrt,
    tanh as c_tanh,
    atan as c_atan,
    atan2 as c_atan2,
    asin as c_asin,
    acos as c_acos,
    sinh as c_sinh,
    cosh as c_cosh,
    fabs as c_fabs,
    pow as c_pow,
    exp2 as c_exp2,
    log2 as c_log2,
    log10 as c_log10,
    asinh as c_asinh,
    acosh as c_acosh,
    atanh as c_atanh,
    cbrt as c_cbrt)

cdef extern from "math.h" nogil:
    void c_sincos "sincos"(double x, double *s, double *c)

# the OP_* enum is generated from tools/opcodes.txt (tapead/_opcodes.pxd)
from tapead._opcodes cimport *

cdef double LN2 = 0.6931471805599453
cdef double LN10 = 2.302585092994046


cdef inline double _pow_base_partial(double x, double c) noexcept nogil:
    # d/dx x**c, with the conventions 0 for c == 0 and x**0 == 1
    if c == 0.0:
        return 0.0
    return c * c_pow(x, c - 1.0)


cdef inline double _powc_value(double x, double c) noexcept nogil:
    # x**c for a constant exponent: small integer powers by multiplication
    # (2 and -1 are correctly rounded, as pow; 3 and 4 within 2 ulp), 0.5 by
    # sqrt where it equals pow (x > 0: pow(-0.0, 0.5) is +0.0, sqrt(-0.0) -0.0)
    cdef double t
    if c == 2.0:
        return x * x
    if c == 3.0:
        return x * x * x
    if c == 4.0:
        t = x * x
        return t * t
    if c == -1.0:
        return 1.0 / x
    if c == 0.5 and x > 0.0:
        return c_sqrt(x)
    return c_pow(x, c)


cdef inline double _powc_partial(double x, double c) noexcept nogil:
    # d/dx x**c as the array rule (elementwise.py's _pow_dx) computes it;
    # 0 for c == 0 (x**0 is the constant 1)
    if c == 2.0:
        return 2.0 * x
    if c == 3.0:
        return 3.0 * (x * x)
    if c == 4.0:
        return 4.0 * (x * x * x)
    if c == -1.0:
        return -1.0 / (x * x)
    if c == 0.5:
        return 0.5 / c_sqrt(x)
    return _pow_base_partial(x, c)


cdef inline double _pow_exp_partial(double x, double v) noexcept nogil:
    # d/dy x**y = x**y log x; 0 where x**y == 0 (JAX's convention at x == 0)
    if v == 0.0:
        return 0.0
    return v * c_log(x)


cdef inline int scalar_eval(int op, double x, double y, double *v,
                            double *d0, double *d1) noexcept nogil:
    """Value and partials of scalar opcode ``op`` at (x, y).

    For binary ops d0 = dv/dx and d1 = dv/dy.  For constant ops y is the
    constant c and only d0 is meaningful; d1 is set to c so that callers
    can store it back unchanged.  Unary ops ignore y and set d1 = 0.
    Returns 0, or -1 for an unknown opcode.
    """
    cdef double t, r
    d1[0] = 0.0
    if op == OP_ADD:
        v[0] = x + y; d0[0] = 1.0; d1[0] = 1.0
    elif op == OP_SUB:
        v[0] = x - y; d0[0] = 1.0; d1[0] = -1.0
    elif op == OP_MUL:
        v[0] = x * y; d0[0] = y; d1[0] = x
    elif op == OP_DIV:
        v[0] = x / y; d0[0] = 1.0 / y; d1[0] = -v[0] / y
    elif op == OP_POW:
        v[0] = c_pow(x, y); d0[0] = _pow_base_partial(x, y)
        d1[0] = _pow_exp_partial(x, v[0])
    elif op == OP_MAXIMUM:
        # ties split the derivative evenly (JAX's convention; docs/nonsmooth)
        v[0] = x if x >= y else y
        d0[0] = 1.0 if x > y else (0.5 if x == y else 0.0)
        d1[0] = 1.0 - d0[0]
    elif op == OP_MINIMUM:
        v[0] = x if x <= y else y
        d0[0] = 1.0 if x < y else (0.5 if x == y else 0.0)
        d1[0] = 1.0 - d0[0]
    elif op == OP_ATAN2:
        t = x * x + y * y
        v[0] = c_atan2(x, y); d0[0] = y / t; d1[0] = -x / t
    elif op == OP_HYPOT:
        v[0] = c_sqrt(x * x + y * y); d0[0] = x / v[0]; d1[0] = y / v[0]
    elif op == OP_LOGADDEXP:
        # numpy's npy_logaddexp, bit for bit; partials e^(x - v) and e^(y - v)
        if x == y:
            v[0] = x + LN2
        else:
            t = x - y
            if t > 0:
                v[0] = x + c_log1p(c_exp(-t))
            elif t <= 0:
                v[0] = y + c_log1p(c_exp(t))
            else:
                v[0] = t
        d0[0] = c_exp(x - v[0]); d1[0] = c_exp(y - v[0])
    elif op == OP_ADDC:
        v[0] = x + y; d0[0] = 1.0; d1[0] = y
    elif op == OP_SUBC:
        v[0] = x - y; d0[0] = 1.0; d1[0] = y
    elif op == OP_RSUBC:
        v[0] = y - x; d0[0] = -1.0; d1[0] = y
    elif op == OP_MULC:
        v[0] = x * y; d0[0] = y; d1[0] = y
    elif op == OP_DIVC:
        v[0] = x / y; d0[0] = 1.0 / y; d1[0] = y
    elif op == OP_RDIVC:
        v[0] = y / x; d0[0] = -v[0] / x; d1[0] = y
    elif op == OP_POWC:
        v[0] = _powc_value(x, y); d0[0] = _powc_partial(x, y); d1[0] = y
    elif op == OP_RPOWC:
        v[0] = c_pow(y, x); d0[0] = _pow_exp_partial(y, v[0]); d1[0] = y
    elif op == OP_NEG:
        v[0] = -x; d0[0] = -1.0
    elif op == OP_POS:
        v[0] = x; d0[0] = 1.0
    elif op == OP_ABS:
        # sign(x): 0 at the kink (docs/nonsmooth.md)
        v[0] = c_fabs(x); d0[0] = 1.0 if x > 0 else (-1.0 if x < 0 else 0.0)
    elif op == OP_SIGN:
        v[0] = 1.0 if x > 0 else (-1.0 if x < 0 else (0.0 if x == 0 else x))
        d0[0] = 0.0
    elif op == OP_RELU:
        v[0] = x if x > 0 else 0.0; d0[0] = 1.0 if x > 0 else 0.0
    elif op == OP_SIN:
        c_sincos(x, v, d0)
    elif op == OP_COS:
        c_sincos(x, &t, v); d0[0] = -t
    elif op == OP_TAN:
        v[0] = c_tan(x); d0[0] = 1.0 + v[0] * v[0]
    elif op == OP_EXP:
        v[0] = c_exp(x); d0[0] = v[0]
    elif op == OP_LOG:
        v[0] = c_log(x); d0[0] = 1.0 / x
    elif op == OP_LOG1P:
        v[0] = c_log1p(x); d0[0] = 1.0 / (1.0 + x)
    elif op == OP_EXPM1:
        v[0] = c_expm1(x); d0[0] = v[0] + 1.0
    elif op == OP_SQRT:
        v[0] = c_sqrt(x); d0[0] = 0.5 / v[0]
    elif op == OP_TANH:
        v[0] = c_tanh(x); d0[0] = 1.0 - v[0] * v[0]
    elif op == OP_ARCTAN:
        v[0] = c_atan(x); d0[0] = 1.0 / (1.0 + x * x)
    elif op == OP_ARCSIN:
        v[0] = c_asin(x); d0[0] = 1.0 / c_sqrt(1.0 - x * x)
    elif op == OP_ARCCOS:
        v[0] = c_acos(x); d0[0] = -1.0 / c_sqrt(1.0 - x * x)
    elif op == OP_SINH:
        v[0] = c_sinh(x); d0[0] = c_cosh(x)
    elif op == OP_COSH:
        v[0] = c_cosh(x); d0[0] = c_sinh(x)
    elif op == OP_SIGMOID:
        if x >= 0:
            v[0] = 1.0 / (1.0 + c_exp(-x))
        else:
            t = c_exp(x); v[0] = t / (1.0 + t)
        d0[0] = v[0] * (1.0 - v[0])
    elif op == OP_SQUARE:
        v[0] = x * x; d0[0] = 2.0 * x
    elif op == OP_RECIPROCAL:
        v[0] = 1.0 / x; d0[0] = -v[0] * v[0]
    elif op == OP_EXP2:
        v[0] = c_exp2(x); d0[0] = v[0] * LN2
    elif op == OP_LOG2:
        v[0] = c_log2(x); d0[0] = 1.0 / (x * LN2)
    elif op == OP_LOG10:
        v[0] = c_log10(x); d0[0] = 1.0 / (x * LN10)
    elif op == OP_ARCSINH:
        v[0] = c_asinh(x); d0[0] = 1.0 / c_sqrt(x * x + 1.0)
    elif op == OP_ARCCOSH:
        v[0] = c_acosh(x); d0[0] = 1.0 / c_sqrt(x * x - 1.0)
    elif op == OP_ARCTANH:
        v[0] = c_atanh(x); d0[0] = 1.0 / (1.0 - x * x)
    elif op == OP_CBRT:
        v[0] = c_cbrt(x); d0[0] = 1.0 / (3.0 * v[0] * v[0])
    else:
        return -1
    return 0


cdef inline bint fixed_partials(int op) noexcept nogil:
    """Whether ``scalar_eval``'s partials of ``op`` do not depend on the
    operands (the linear ops, and division by a constant): the partials a
    recording stored stay right at any inputs, so a replay recomputes only
    such a node's value."""
    return (op == OP_ADD or op == OP_SUB or op == OP_ADDC or op == OP_SUBC or
            op == OP_RSUBC or op == OP_MULC or op == OP_DIVC or op == OP_NEG or
            op == OP_POS)
