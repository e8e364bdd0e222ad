# Elementwise entry points (included by _core.pyx): the scalar fast path
# for tracers and duals, numpy's own function for everything else.  The
# numpy ufunc -> opcode table lets ``np.sin(tracer)`` reach the same path.
# Generated from the opcode table; keep the two in step.

# numpy functions cached as C globals (no module attribute lookup per call)
cdef object _NP_absolute = np.absolute
cdef object _NP_matmul = np.matmul
cdef object _NP_add = np.add
cdef object _NP_arccos = np.arccos
cdef object _NP_arccosh = np.arccosh
cdef object _NP_arcsin = np.arcsin
cdef object _NP_arcsinh = np.arcsinh
cdef object _NP_arctan = np.arctan
cdef object _NP_arctan2 = np.arctan2
cdef object _NP_arctanh = np.arctanh
cdef object _NP_cbrt = np.cbrt
cdef object _NP_cos = np.cos
cdef object _NP_cosh = np.cosh
cdef object _NP_exp = np.exp
cdef object _NP_exp2 = np.exp2
cdef object _NP_expm1 = np.expm1
cdef object _NP_hypot = np.hypot
cdef object _NP_log = np.log
cdef object _NP_log10 = np.log10
cdef object _NP_log1p = np.log1p
cdef object _NP_log2 = np.log2
cdef object _NP_maximum = np.maximum
cdef object _NP_minimum = np.minimum
cdef object _NP_multiply = np.multiply
cdef object _NP_negative = np.negative
cdef object _NP_positive = np.positive
cdef object _NP_power = np.power
cdef object _NP_reciprocal = np.reciprocal
cdef object _NP_sign = np.sign
cdef object _NP_sin = np.sin
cdef object _NP_sinh = np.sinh
cdef object _NP_sqrt = np.sqrt
cdef object _NP_square = np.square
cdef object _NP_subtract = np.subtract
cdef object _NP_tan = np.tan
cdef object _NP_tanh = np.tanh
cdef object _NP_true_divide = np.true_divide


cdef inline object _u(int op, object x, object npf):
    if type(x) is Tracer or type(x) is Dual:
        return unary(op, x)
    return npf(x)


cdef inline object _b(int op, object x, object y, object npf):
    if type(x) is Tracer or type(x) is Dual or type(y) is Tracer or type(y) is Dual:
        return binary(op, x, y)
    return npf(x, y)


def negative(x):
    """Elementwise ``np.negative``, differentiable."""
    return _u(OP_NEG, x, _NP_negative)

def positive(x):
    """Elementwise ``np.positive``, differentiable."""
    return _u(OP_POS, x, _NP_positive)

def absolute(x):
    """Elementwise ``np.absolute``, differentiable."""
    return _u(OP_ABS, x, _NP_absolute)

def sign(x):
    """Elementwise ``np.sign``, differentiable."""
    return _u(OP_SIGN, x, _NP_sign)

def sin(x):
    """Elementwise ``np.sin``, differentiable."""
    return _u(OP_SIN, x, _NP_sin)

def cos(x):
    """Elementwise ``np.cos``, differentiable."""
    return _u(OP_COS, x, _NP_cos)

def tan(x):
    """Elementwise ``np.tan``, differentiable."""
    return _u(OP_TAN, x, _NP_tan)

def exp(x):
    """Elementwise ``np.exp``, differentiable."""
    return _u(OP_EXP, x, _NP_exp)

def log(x):
    """Elementwise ``np.log``, differentiable."""
    return _u(OP_LOG, x, _NP_log)

def log1p(x):
    """Elementwise ``np.log1p``, differentiable."""
    return _u(OP_LOG1P, x, _NP_log1p)

def expm1(x):
    """Elementwise ``np.expm1``, differentiable."""
    return _u(OP_EXPM1, x, _NP_expm1)

def sqrt(x):
    """Elementwise ``np.sqrt``, differentiable."""
    return _u(OP_SQRT, x, _NP_sqrt)

def tanh(x):
    """Elementwise ``np.tanh``, differentiable."""
    return _u(OP_TANH, x, _NP_tanh)

def arctan(x):
    """Elementwise ``np.arctan``, differentiable."""
    return _u(OP_ARCTAN, x, _NP_arctan)

def arcsin(x):
    """Elementwise ``np.arcsin``, differentiable."""
    return _u(OP_ARCSIN, x, _NP_arcsin)

def arccos(x):
    """Elementwise ``np.arccos``, differentiable."""
    return _u(OP_ARCCOS, x, _NP_arccos)

def sinh(x):
    """Elementwise ``np.sinh``, differentiable."""
    return _u(OP_SINH, x, _NP_sinh)

def cosh(x):
    """Elementwise ``np.cosh``, differentiable."""
    return _u(OP_COSH, x, _NP_cosh)

def square(x):
    """Elementwise ``np.square``, differentiable."""
    return _u(OP_SQUARE, x, _NP_square)

def reciprocal(x):
    """Elementwise ``np.reciprocal``, differentiable."""
    return _u(OP_RECIPROCAL, x, _NP_reciprocal)

def exp2(x):
    """Elementwise ``np.exp2``, differentiable."""
    return _u(OP_EXP2, x, _NP_exp2)

def log2(x):
    """Elementwise ``np.log2``, differentiable."""
    return _u(OP_LOG2, x, _NP_log2)

def log10(x):
    """Elementwise ``np.log10``, differentiable."""
    return _u(OP_LOG10, x, _NP_log10)

def arcsinh(x):
    """Elementwise ``np.arcsinh``, differentiable."""
    return _u(OP_ARCSINH, x, _NP_arcsinh)

def arccosh(x):
    """Elementwise ``np.arccosh``, differentiable."""
    return _u(OP_ARCCOSH, x, _NP_arccosh)

def arctanh(x):
    """Elementwise ``np.arctanh``, differentiable."""
    return _u(OP_ARCTANH, x, _NP_arctanh)

def cbrt(x):
    """Elementwise ``np.cbrt``, differentiable."""
    return _u(OP_CBRT, x, _NP_cbrt)

def add(x, y):
    """Elementwise ``np.add``, differentiable."""
    return _b(OP_ADD, x, y, _NP_add)

def subtract(x, y):
    """Elementwise ``np.subtract``, differentiable."""
    return _b(OP_SUB, x, y, _NP_subtract)

def multiply(x, y):
    """Elementwise ``np.multiply``, differentiable."""
    return _b(OP_MUL, x, y, _NP_multiply)

def divide(x, y):
    """Elementwise ``np.true_divide``, differentiable."""
    return _b(OP_DIV, x, y, _NP_true_divide)

def power(x, y):
    """Elementwise ``np.power``, differentiable."""
    return _b(OP_POW, x, y, _NP_power)

def maximum(x, y):
    """Elementwise ``np.maximum``, differentiable."""
    return _b(OP_MAXIMUM, x, y, _NP_maximum)

def minimum(x, y):
    """Elementwise ``np.minimum``, differentiable."""
    return _b(OP_MINIMUM, x, y, _NP_minimum)

def arctan2(x, y):
    """Elementwise ``np.arctan2``, differentiable."""
    return _b(OP_ATAN2, x, y, _NP_arctan2)

def hypot(x, y):
    """Elementwise ``np.hypot``, differentiable."""
    return _b(OP_HYPOT, x, y, _NP_hypot)


cdef dict _UFUNC_UNARY = {np.negative: OP_NEG,
    np.positive: OP_POS,
    np.absolute: OP_ABS,
    np.sign: OP_SIGN,
    np.sin: OP_SIN,
    np.cos: OP_COS,
    np.tan: OP_TAN,
    np.exp: OP_EXP,
    np.log: OP_LOG,
    np.log1p: OP_LOG1P,
    np.expm1: OP_EXPM1,
    np.sqrt: OP_SQRT,
    np.tanh: OP_TANH,
    np.arctan: OP_ARCTAN,
    np.arcsin: OP_ARCSIN,
    np.arccos: OP_ARCCOS,
    np.sinh: OP_SINH,
    np.cosh: OP_COSH,
    np.square: OP_SQUARE,
    np.reciprocal: OP_RECIPROCAL,
    np.exp2: OP_EXP2,
    np.log2: OP_LOG2,
    np.log10: OP_LOG10,
    np.arcsinh: OP_ARCSINH,
    np.arccosh: OP_ARCCOSH,
    np.arctanh: OP_ARCTANH,
    np.cbrt: OP_CBRT}
cdef dict _UFUNC_BINARY = {np.add: OP_ADD,
    np.subtract: OP_SUB,
    np.multiply: OP_MUL,
    np.true_divide: OP_DIV,
    np.power: OP_POW,
    np.maximum: OP_MAXIMUM,
    np.minimum: OP_MINIMUM,
    np.arctan2: OP_ATAN2,
    np.hypot: OP_HYPOT}


cdef object array_ufunc(object ufunc, str method, tuple inputs, dict kwargs):
    """``__array_ufunc__`` of tracers: opcodes in C, the rest in Python."""
    cdef object op
    if method == "__call__" and not kwargs:
        if ufunc is _NP_matmul and len(inputs) == 2:
            return matmul_boxes(inputs[0], inputs[1])
        if len(inputs) == 1:
            op = _UFUNC_UNARY.get(ufunc)
            if op is not None:
                return unary(<int>op, inputs[0])
        elif len(inputs) == 2:
            op = _UFUNC_BINARY.get(ufunc)
            if op is not None:
                return binary(<int>op, inputs[0], inputs[1])
    return _box_methods["__array_ufunc__"](ufunc, method, inputs, kwargs)
