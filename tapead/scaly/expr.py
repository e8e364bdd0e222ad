"""Expression nodes of the Scaly graph API, and their interning.

An ``Expr`` is a node of a symbolic DAG: an op name, operand nodes, static
attributes, a ``TensorType`` and a ``diff`` flag (whether it depends on a
differentiable input).  Nodes are *interned*: building the same op on the
same operands with the same attributes returns the very same object, so
equal subexpressions are shared and identity comparison is structural
equality.

The op table (``OPS``) lives here but is filled by ``tapead.scaly.ops``;
each entry holds an op's type rule, its evaluation and its derivative rules.
Walking and rewriting graphs (``topo_order``, ``substitute``...) is
``tapead.scaly.graphs``.
"""
from __future__ import annotations

import itertools
import weakref
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

from tapead.errors import SymbolicBoolError
from tapead.scaly.types import TensorType, dtypes, normalize_dtype, normalize_shape


class OpRule:
    """Everything Scaly knows about one op, in one place.

    Attributes
    ----------
    name : str
        The op name printed in listings (``expr.<name>``).
    infer : callable
        ``infer(operands, attrs) -> TensorType``.
    fn : callable
        ``fn(*values, **attrs)`` with ``tapead.numpy`` operations, so it works
        on plain numpy values (constant folding) and on tape tracers (lowering).
    vjp : callable or None
        ``vjp(g, node) -> [contribution or None per operand]``; contributions
        are new expressions (``None`` is a known zero).
    jvp : callable or None
        ``jvp(tangents, node) -> tangent or None`` with ``None`` a known zero.
    jvp_many : callable or None
        The batched forward rule, ``jvp_many(tangents, node, k)``: every
        tangent carries ``k`` directions as an extra leading axis (shape
        ``(k,) + operand.shape``) and so does the result.  Without it a
        batched forward pass runs ``jvp`` once per direction.
    prim : Primitive or None
        The tapead primitive ``fn`` records on a tape (its scalar opcode is
        ``prim.opcode``): the op's values and derivatives agree with it, at
        smooth points and at the conventions of docs/nonsmooth.md.  None for
        leaves and calls of other Functions.
    own : str or None
        None when the derivative rules are the primitive's (built from its
        local partials by ``tapead.scaly.ops.from_primitive``); otherwise why
        the op keeps rules of its own.
    """

    __slots__ = ("name", "infer", "fn", "vjp", "jvp", "diff", "jvp_many", "prim", "own")

    def __init__(self, name, infer, fn, vjp=None, jvp=None, diff=True, jvp_many=None,
                 prim=None, own=None):
        self.name, self.infer, self.fn, self.vjp, self.jvp = name, infer, fn, vjp, jvp
        self.diff = diff
        self.jvp_many = jvp_many
        self.prim = prim
        self.own = own


#: op name -> OpRule, filled by tapead.scaly.ops (the only place rules live).
OPS: Dict[str, OpRule] = {}

_INTERN: "weakref.WeakValueDictionary[tuple, Expr]" = weakref.WeakValueDictionary()
_ids = itertools.count()


def _hashable(value):
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    if type(value) is tuple:
        try:                        # numbers (index lists): the tuple itself
            hash(value)
            return value
        except TypeError:
            pass
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, slice):
        return ("slice", value.start, value.stop, value.step)
    return value


class Expr:
    """A symbolic tensor: one interned node of an expression DAG.

    Build them with ``sc.sym``, ``sc.const`` and the operators; a
    ``@sc.function`` body receives them as its arguments.

    Attributes
    ----------
    shape : tuple of int
    dtype : numpy dtype

    Examples
    --------
    >>> import tapead.scaly as sc
    >>> x = sc.sym("x", 3)
    >>> y = (x * 2.0).sin()[1:]
    >>> y, y.shape
    (<sc.Expr expr.gather : tensor<2xfloat64 diff>>, (2,))
    """

    __slots__ = ("id", "op", "operands", "attrs", "type", "diff", "__weakref__")
    __hash__ = object.__hash__      # __eq__ builds an expression

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """numpy's ufuncs on expressions: the unary ones that are Scaly ops build
        that op (``np.cos(x)`` is ``x.cos()``, so a primitive's local partial,
        written with numpy for plain values, builds expressions); binary ones
        are the operators (``a < x`` is ``x > a``, as Python's reflected
        operators make it).  Anything else is refused by numpy (TypeError)."""
        if method != "__call__" or kwargs:
            return NotImplemented
        if len(inputs) == 1:
            op = _UNARY_UFUNCS.get(ufunc)
            return NotImplemented if op is None else apply(op, inputs[0])
        names = _BINARY_UFUNCS.get(ufunc)
        if names is None or len(inputs) != 2:
            return NotImplemented
        a, b = inputs
        if isinstance(a, Expr):
            return getattr(a, names[0])(b)
        return getattr(b, names[1])(a)

    # -- structure --------------------------------------------------------
    @property
    def shape(self) -> Tuple[int, ...]:
        return self.type.shape

    @property
    def dtype(self) -> np.dtype:
        return self.type.dtype

    @property
    def ndim(self) -> int:
        return len(self.type.shape)

    @property
    def size(self) -> int:
        return self.type.size

    def __repr__(self) -> str:
        name = self.attrs.get("name")
        what = f"input {name!r}" if self.op == "input" else f"expr.{self.op}"
        return f"<sc.Expr {what} : {self.type.render(self.diff)}>"

    # -- arithmetic ---------------------------------------------------------
    def __add__(self, o): return apply("add", self, o)
    def __radd__(self, o): return apply("add", o, self)
    def __sub__(self, o): return apply("sub", self, o)
    def __rsub__(self, o): return apply("sub", o, self)
    def __mul__(self, o): return apply("mul", self, o)
    def __rmul__(self, o): return apply("mul", o, self)
    def __truediv__(self, o): return apply("div", self, o)
    def __rtruediv__(self, o): return apply("div", o, self)
    def __pow__(self, o): return apply("pow", self, o)
    def __rpow__(self, o): return apply("pow", o, self)
    def __matmul__(self, o): return apply("matmul", self, o)
    def __rmatmul__(self, o): return apply("matmul", o, self)
    def __neg__(self): return apply("neg", self)
    def __pos__(self): return self
    def __abs__(self): return apply("abs", self)

    # -- comparisons (bool expressions) ---------------------------------
    def __lt__(self, o): return apply("lt", self, o)
    def __le__(self, o): return apply("le", self, o)
    def __gt__(self, o): return apply("gt", self, o)
    def __ge__(self, o): return apply("ge", self, o)
    def __eq__(self, o): return apply("eq", self, o)   # type: ignore[override]
    def __ne__(self, o): return apply("ne", self, o)   # type: ignore[override]

    def __bool__(self):
        raise SymbolicBoolError(
            f"the truth value of a symbolic expression ({self!r}) is not known while a "
            "Scaly Function is traced, so Python `if`, `while`, `and`, `or` and `not` "
            "cannot branch on it; use sc.cond(selector, (false_fn, true_fn), *operands) "
            "to select a branch, or sc.while_loop for a loop with a symbolic condition")

    def _no_conversion(self, kind):
        raise SymbolicBoolError(
            f"{kind}() of a symbolic expression ({self!r}) has no value while a Scaly "
            "Function is traced; keep computing with expressions (use sc.cond to branch)")

    def __float__(self): self._no_conversion("float")
    def __int__(self): self._no_conversion("int")
    def __index__(self): self._no_conversion("index")

    # -- indexing ---------------------------------------------------------
    def __getitem__(self, key):
        """Basic numpy indexing (ints, slices, ``None``, ``...``, int arrays)."""
        keys = key if isinstance(key, tuple) else (key,)
        if any(isinstance(k, Expr) for k in keys):
            raise TypeError("indexing with a symbolic index is not supported yet; "
                            "index with Python ints, slices or integer arrays")
        if self.ndim == 0 and key != () and key is not Ellipsis:
            raise IndexError(f"cannot index a scalar expression with {key!r}")
        positions = np.arange(self.size, dtype=np.int64).reshape(self.shape)[key]
        return gather(self, np.asarray(positions).reshape(-1), np.shape(positions))

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a scalar expression")
        return (self[i] for i in range(self.shape[0]))

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a scalar expression")
        return self.shape[0]

    # -- methods ----------------------------------------------------------
    def sin(self): return apply("sin", self)
    def cos(self): return apply("cos", self)
    def tan(self): return apply("tan", self)
    def exp(self): return apply("exp", self)
    def log(self): return apply("log", self)
    def sqrt(self): return apply("sqrt", self)
    def abs(self): return apply("abs", self)
    def tanh(self): return apply("tanh", self)

    def sum(self, axis=None):
        """Sum over ``axis`` (an int, a tuple, or None for every axis)."""
        if axis is None:
            axes = tuple(range(self.ndim))
        else:
            axes = tuple(sorted(a % self.ndim for a in (
                axis if isinstance(axis, tuple) else (axis,))))
        return apply("sum", self, axes=axes)

    def reshape(self, *shape):
        shape = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
        return reshape(self, shape)

    @property
    def T(self):
        """The axes reversed (``x.T``; a 0-d or 1-d expression is itself)."""
        if self.ndim < 2:
            return self
        return apply("transpose", self, axes=tuple(reversed(range(self.ndim))))


#: numpy ufunc -> the Scaly op it builds on an expression
_UNARY_UFUNCS = {np.sin: "sin", np.cos: "cos", np.tan: "tan", np.exp: "exp", np.log: "log",
                 np.sqrt: "sqrt", np.tanh: "tanh", np.absolute: "abs", np.sign: "sign",
                 np.negative: "neg"}
#: numpy binary ufunc -> (operator of a left expression, reflected operator of a right one)
_BINARY_UFUNCS = {
    np.add: ("__add__", "__radd__"), np.subtract: ("__sub__", "__rsub__"),
    np.multiply: ("__mul__", "__rmul__"), np.true_divide: ("__truediv__", "__rtruediv__"),
    np.power: ("__pow__", "__rpow__"), np.matmul: ("__matmul__", "__rmatmul__"),
    np.less: ("__lt__", "__gt__"), np.less_equal: ("__le__", "__ge__"),
    np.greater: ("__gt__", "__lt__"), np.greater_equal: ("__ge__", "__le__"),
    np.equal: ("__eq__", "__eq__"), np.not_equal: ("__ne__", "__ne__"),
}


# ---------------------------------------------------------------------------
# building nodes
# ---------------------------------------------------------------------------

def make_node(op: str, operands: Sequence[Expr], attrs: Dict[str, Any]) -> Expr:
    """The interned node ``op(operands) {attrs}``: created once, then reused."""
    operands = tuple(operands)
    key = (op, tuple(o.id for o in operands),
           tuple(sorted((k, _hashable(v)) for k, v in attrs.items())))
    node = _INTERN.get(key)
    if node is not None:
        return node
    rule = OPS.get(op)
    if rule is None:
        raise KeyError(f"unknown Scaly op {op!r}")
    node = Expr.__new__(Expr)
    node.id = next(_ids)
    node.op = op
    node.operands = operands
    node.attrs = dict(attrs)
    node.type = rule.infer(operands, node.attrs)
    node.diff = (rule.diff and node.type.dtype == dtypes.float64
                 and (op == "input" or any(o.diff for o in operands)))
    _INTERN[key] = node
    return node


def const(value, dtype=None) -> Expr:
    """A constant expression: ``sc.const(1.0)``, ``sc.const(np.ones(3))``.

    Parameters
    ----------
    value : float or array_like
        Any shape.
    dtype : numpy dtype, optional
        Defaults to the value's (float64 for floats).

    Returns
    -------
    Expr
        A constant node of ``value``'s shape (not differentiable).

    Examples
    --------
    >>> import numpy as np, tapead.scaly as sc
    >>> sc.const(np.ones(2))
    <sc.Expr expr.const : tensor<2xfloat64>>
    """
    if isinstance(value, Expr):
        return value
    arr = np.asarray(value)
    dt = normalize_dtype(arr.dtype if dtype is None else dtype)
    arr = np.array(arr, dtype=dt)         # an owned copy: constants never change
    arr.setflags(write=False)
    return make_node("const", (), {"value": arr})


def sym(name: str, shape=(), dtype=dtypes.float64) -> Expr:
    """A named symbolic input, ``sc.sym("x", 3)``.

    The same name, shape and dtype always give the same node.

    Parameters
    ----------
    name : str
    shape : (), int or tuple of int
    dtype : numpy dtype, default float64

    Returns
    -------
    Expr
        An input node of that shape.

    Examples
    --------
    >>> import tapead.scaly as sc
    >>> x = sc.sym("x", 3)
    >>> x.shape, sc.sym("x", 3) is x
    ((3,), True)
    """
    if isinstance(shape, TensorType):
        ttype = shape
    else:
        ttype = TensorType(normalize_shape(shape), dtype)
    node = make_node("input", (), {"name": str(name), "shape": ttype.shape,
                                   "dtype": ttype.dtype_name})
    return node


def as_expr(value, like: Optional[Expr] = None) -> Expr:
    """``value`` as an expression (numbers become constants).

    A Python number next to a float expression becomes a float64 constant.
    """
    if isinstance(value, Expr):
        return value
    if isinstance(value, (bool, np.bool_)):
        return const(value)
    if like is not None and like.dtype == dtypes.float64 or isinstance(value, float):
        return const(value, dtypes.float64)
    return const(value)


def apply(op: str, *operands, **attrs) -> Expr:
    """``op`` applied to operands (numbers are turned into constants)."""
    like = next((o for o in operands if isinstance(o, Expr)), None)
    return make_node(op, [as_expr(o, like) for o in operands], attrs)


def gather(x: Expr, indices, shape) -> Expr:
    """``x.ravel()[indices].reshape(shape)`` (how indexing is represented)."""
    return apply("gather", x, indices=_index_tuple(indices), shape=normalize_shape(shape))


def scatter(g: Expr, indices, shape) -> Expr:
    """``zeros(shape)`` with ``g.ravel()`` added at the flat ``indices``."""
    return apply("scatter", g, indices=_index_tuple(indices), shape=normalize_shape(shape))


def _index_tuple(indices) -> tuple:
    """Flat indices as a tuple of Python ints (an attribute of a node)."""
    if type(indices) is tuple and all(type(i) is int for i in indices):
        return indices
    return tuple(np.asarray(indices, dtype=np.int64).ravel().tolist())


def reshape(x: Expr, shape) -> Expr:
    shape = normalize_shape(shape)
    if -1 in shape:
        known = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
        shape = tuple(x.size // max(known, 1) if s == -1 else s for s in shape)
    return apply("reshape", x, shape=shape)


def stack(items: Sequence, axis: int = 0) -> Expr:
    """``sc.stack([a, b, ...])``: a new leading (or ``axis``) dimension.

    Parameters
    ----------
    items : sequence of Expr or numbers
        All of one shape ``s``.
    axis : int
        Where the new dimension goes.

    Returns
    -------
    Expr
        Shape ``s`` with ``len(items)`` inserted at ``axis``.

    Examples
    --------
    >>> import tapead.scaly as sc
    >>> x = sc.sym("x", 3)
    >>> sc.stack([x[0], 2.0 * x[1]]).shape
    (2,)
    """
    items = list(items)
    if not items:
        raise ValueError("sc.stack needs at least one expression")
    like = next((o for o in items if isinstance(o, Expr)), None)
    exprs = [as_expr(o, like) for o in items]
    ndim = exprs[0].ndim + 1
    return make_node("stack", exprs, {"axis": axis % ndim})


def sumsqr(x) -> Expr:
    """The sum of squares of every element, ``(x * x).sum()``.

    Parameters
    ----------
    x : Expr
        Any shape.

    Returns
    -------
    Expr
        Shape ``()``.

    Examples
    --------
    >>> import numpy as np, tapead.scaly as sc
    >>> @sc.function(sc.L("x", 2), sc.L("y", ...))
    ... def f(x):
    ...     return sc.sumsqr(x)
    >>> print(f(np.array([3.0, 4.0])))
    25.0
    """
    x = as_expr(x)
    return (x * x).sum()


def zeros(shape, dtype=dtypes.float64) -> Expr:
    return const(np.zeros(normalize_shape(shape), dtype))


def ones(shape, dtype=dtypes.float64) -> Expr:
    return const(np.ones(normalize_shape(shape), dtype))


def is_const(x: Expr, value=None) -> bool:
    """Whether ``x`` is a constant (equal everywhere to ``value`` if given)."""
    if x.op != "const":
        return False
    return value is None or bool(np.all(x.attrs["value"] == value))
