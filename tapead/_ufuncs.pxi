# Elementwise entry points (included by _core.pyx): the scalar fast path
# for tracers and duals, numpy's own function for everything else.  The
# numpy ufunc -> opcode table lets ``np.sin(tracer)`` reach the same path.
# Generated from the opcode table; keep the two in step.

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
    return _u(OP_NEG, x, np.negative)

def positive(x):
    """Elementwise ``np.positive``, differentiable."""
    return _u(OP_POS, x, np.positive)

def absolute(x):
    """Elementwise ``np.absolute``, differentiable."""
    return _u(OP_ABS, x, np.absolute)

def sign(x):
    """Elementwise ``np.sign``, differentiable."""
    return _u(OP_SIGN, x, np.sign)

def sin(x):
    """Elementwise ``np.sin``, differentiable."""
    return _u(OP_SIN, x, np.sin)

def cos(x):
    """Elementwise ``np.cos``, differentiable."""
    return _u(OP_COS, x, np.cos)

def tan(x):
    """Elementwise ``np.tan``, differentiable."""
    return _u(OP_TAN, x, np.tan)

def exp(x):
    """Elementwise ``np.exp``, differentiable."""
    return _u(OP_EXP, x, np.exp)

def log(x):
    """Elementwise ``np.log``, differentiable."""
    return _u(OP_LOG, x, np.log)

def log1p(x):
    """Elementwise ``np.log1p``, differentiable."""
    return _u(OP_LOG1P, x, np.log1p)

def expm1(x):
    """Elementwise ``np.expm1``, differentiable."""
    return _u(OP_EXPM1, x, np.expm1)

def sqrt(x):
    """Elementwise ``np.sqrt``, differentiable."""
    return _u(OP_SQRT, x, np.sqrt)

def tanh(x):
    """Elementwise ``np.tanh``, differentiable."""
    return _u(OP_TANH, x, np.tanh)

def arctan(x):
    """Elementwise ``np.arctan``, differentiable."""
    return _u(OP_ARCTAN, x, np.arctan)

def arcsin(x):
    """Elementwise ``np.arcsin``, differentiable."""
    return _u(OP_ARCSIN, x, np.arcsin)

def arccos(x):
    """Elementwise ``np.arccos``, differentiable."""
    return _u(OP_ARCCOS, x, np.arccos)

def sinh(x):
    """Elementwise ``np.sinh``, differentiable."""
    return _u(OP_SINH, x, np.sinh)

def cosh(x):
    """Elementwise ``np.cosh``, differentiable."""
    return _u(OP_COSH, x, np.cosh)

def square(x):
    """Elementwise ``np.square``, differentiable."""
    return _u(OP_SQUARE, x, np.square)

def reciprocal(x):
    """Elementwise ``np.reciprocal``, differentiable."""
    return _u(OP_RECIPROCAL, x, np.reciprocal)

def exp2(x):
    """Elementwise ``np.exp2``, differentiable."""
    return _u(OP_EXP2, x, np.exp2)

def log2(x):
    """Elementwise ``np.log2``, differentiable."""
    return _u(OP_LOG2, x, np.log2)

def log10(x):
    """Elementwise ``np.log10``, differentiable."""
    return _u(OP_LOG10, x, np.log10)

def arcsinh(x):
    """Elementwise ``np.arcsinh``, differentiable."""
    return _u(OP_ARCSINH, x, np.arcsinh)

def arccosh(x):
    """Elementwise ``np.arccosh``, differentiable."""
    return _u(OP_ARCCOSH, x, np.arccosh)

def arctanh(x):
    """Elementwise ``np.arctanh``, differentiable."""
    return _u(OP_ARCTANH, x, np.arctanh)

def cbrt(x):
    """Elementwise ``np.cbrt``, differentiable."""
    return _u(OP_CBRT, x, np.cbrt)

def add(x, y):
    """Elementwise ``np.add``, differentiable."""
    return _b(OP_ADD, x, y, np.add)

def subtract(x, y):
    """Elementwise ``np.subtract``, differentiable."""
    return _b(OP_SUB, x, y, np.subtract)

def multiply(x, y):
    """Elementwise ``np.multiply``, differentiable."""
    return _b(OP_MUL, x, y, np.multiply)

def divide(x, y):
    """Elementwise ``np.true_divide``, differentiable."""
    return _b(OP_DIV, x, y, np.true_divide)

def power(x, y):
    """Elementwise ``np.power``, differentiable."""
    return _b(OP_POW, x, y, np.power)

def maximum(x, y):
    """Elementwise ``np.maximum``, differentiable."""
    return _b(OP_MAXIMUM, x, y, np.maximum)

def minimum(x, y):
    """Elementwise ``np.minimum``, differentiable."""
    return _b(OP_MINIMUM, x, y, np.minimum)

def arctan2(x, y):
    """Elementwise ``np.arctan2``, differentiable."""
    return _b(OP_ATAN2, x, y, np.arctan2)

def hypot(x, y):
    """Elementwise ``np.hypot``, differentiable."""
    return _b(OP_HYPOT, x, y, np.hypot)


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
        if len(inputs) == 1:
            op = _UFUNC_UNARY.get(ufunc)
            if op is not None:
                return unary(<int>op, inputs[0])
        elif len(inputs) == 2:
            op = _UFUNC_BINARY.get(ufunc)
            if op is not None:
                return binary(<int>op, inputs[0], inputs[1])
    return _box_methods["__array_ufunc__"](ufunc, method, inputs, kwargs)
