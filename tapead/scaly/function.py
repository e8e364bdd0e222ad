"""``sc.function``: named, traced expression graphs that can be called.

A Function is built by calling the decorated Python body once on symbolic
inputs (``sc.Expr``); the expressions it returns are the Function's graph.
Calling a Function on numpy values evaluates that graph on the compiled
tape (see ``tapead.scaly.lower``); calling it on expressions builds call
nodes (``expr.call``) in the caller's graph, so Functions compose; calls
are expanded before differentiation and evaluation
(``tapead.scaly.calls``); mapped calls are expanded for evaluation only.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from tapead.scaly import layout as lay
from tapead.scaly import tracing
from tapead.scaly.calls import EVALUATION_KEEPS, call_nodes, expand_calls
from tapead.errors import LayoutError, ScalyShapeError, UnknownNameError
from tapead.scaly.expr import Expr, as_expr, sym
from tapead.scaly.graphs import substitute, topo_order
from tapead.scaly.lower import LoweredProgram, free_inputs
from tapead.scaly.types import TensorType, dtypes
from tapead.scaly.simplify import simplify


class Function:
    """A Scaly Function: named inputs, named outputs, an expression graph.

    Attributes
    ----------
    name : str
        The Python function's name, or a derived name such as ``f_grad_y_x``.
    params : list of layouts
        One layout (``Leaf`` or ``Group``) per positional parameter.
    output_layout : Leaf or Group
    inputs, outputs : list of Expr
        The input nodes and output expressions, one per leaf.

    Examples
    --------
    >>> import numpy as np, tapead.scaly as sc
    >>> @sc.function(sc.L("x", 2), sc.L("y", ...))
    ... def h(x):
    ...     return (x[0] * x[1]).sin()
    >>> h
    <sc.Function h(x: tensor<2xfloat64>) -> (y: tensor<float64>)>
    >>> print(round(float(h(np.array([1.0, 2.0]))), 8))
    0.90929743
    >>> h(sc.sym("z", 2))                    # on an expression: a call node
    <sc.Expr expr.call : tensor<float64 diff>>
    """

    def __init__(self, name: str, params: Sequence[Any], output_layout: Any,
                 inputs: Sequence[Expr], outputs: Sequence[Expr], style: str = "arg"):
        self.name = name
        self.params = list(params)
        self.output_layout = output_layout
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.style = style
        self.input_leaves = lay.leaves(self.params)
        self.output_leaves = lay.leaves([output_layout])
        self._check_names()
        free = free_inputs(self.outputs, self.inputs)
        #: input nodes of an enclosing Function that this one uses without
        #: declaring them (a Function defined while another one's body is
        #: traced: a closure); the loops and branches pass them in
        #: (``with_inputs``), anything else refuses the Function (``closed``)
        self.captured: List[Expr] = []
        if free and tracing.tracing():
            self.captured = free
        elif free:
            raise LayoutError(self._free_message(free))
        self._with: Dict[tuple, "Function"] = {}
        self._programs: Dict[bool, LoweredProgram] = {}
        self._simplified: Optional[List[Expr]] = None
        self._expanded: Optional[List[Expr]] = None
        self._mapped: Optional[List[Expr]] = None
        #: per output, its ``Sparsity`` when the output holds the compact values
        #: of a sparse derivative (``sc.sparse_jacobian``), else None
        self.output_sparsities: List[Any] = [None] * len(self.outputs)

    def _check_names(self) -> None:
        for what, names in (("input", self.input_names), ("output", self.output_names)):
            seen = set()
            for n in names:
                if n in seen:
                    raise LayoutError(f"function {self.name}: the {what} name {n!r} is "
                                      "used twice; give every leaf its own name")
                seen.add(n)

    # -- closures -----------------------------------------------------------
    def _free_message(self, free) -> str:
        names = ", ".join(repr(n.attrs["name"]) for n in free)
        return (f"function {self.name}: the outputs depend on symbols {names} that are not "
                "inputs of the function; declare them as inputs")

    def closed(self, what: str) -> "Function":
        """``self``, refused (LayoutError) when it captured symbols of an
        enclosing Function: only sc.scan, sc.while_loop and sc.cond pass them in."""
        if self.captured:
            raise LayoutError(
                self._free_message(self.captured) + f" (it uses them from the function "
                f"being defined, a closure: {what} cannot pass them in; the bodies of "
                "sc.scan and sc.while_loop and the branches of sc.cond can)")
        return self

    def with_inputs(self, extra: Sequence[Expr]) -> "Function":
        """This Function with the input nodes ``extra`` (its captured symbols,
        and maybe others) as further trailing parameters: its closure made
        explicit (a parameter whose name is taken is renamed)."""
        key = tuple(e.id for e in extra)
        fn = self._with.get(key)
        if fn is not None:
            return fn
        taken = set(self.input_names)
        own = {i.id for i in self.inputs}
        new_inputs, mapping = [], {}
        for node in extra:
            name, k = node.attrs["name"], 2
            while name in taken:
                name, k = f"{node.attrs['name']}_{k}", k + 1
            taken.add(name)
            new = node if name == node.attrs["name"] and node.id not in own else \
                sym(name, node.type)
            if new is not node:
                mapping[node.id] = new
            new_inputs.append(new)
        outputs = substitute(self.outputs, mapping) if mapping else list(self.outputs)
        params = list(self.params) + [leaf_like(self.style, n.attrs["name"], n.type)
                                      for n in new_inputs]
        fn = Function(self.name, params, self.output_layout, self.inputs + new_inputs,
                      outputs, self.style)
        self._with[key] = fn
        return fn

    # -- names --------------------------------------------------------------
    @property
    def input_names(self) -> List[str]:
        return [leaf.name for leaf in self.input_leaves]

    @property
    def output_names(self) -> List[str]:
        return [leaf.name for leaf in self.output_leaves]

    def input(self, name: str) -> Expr:
        """The input node called ``name``."""
        return self.inputs[self._index(name, self.input_names, "input")]

    def output(self, name: str) -> Expr:
        """The output expression called ``name``."""
        return self.outputs[self._index(name, self.output_names, "output")]

    def _index(self, name: str, names: List[str], what: str) -> int:
        if name not in names:
            raise UnknownNameError(f"function {self.name} has no {what} named {name!r}; its "
                                   f"{what}s are {', '.join(map(repr, names))}")
        return names.index(name)

    def __repr__(self) -> str:
        ins = ", ".join(f"{leaf.name}: {leaf.type.render()}" for leaf in self.input_leaves)
        outs = ", ".join(f"{leaf.name}: {leaf.type.render()}" for leaf in self.output_leaves)
        return f"<sc.Function {self.name}({ins}) -> ({outs})>"

    # -- calling ----------------------------------------------------------
    def __call__(self, *args):
        """Evaluate on numbers (numpy results) or build call nodes on expressions."""
        if self.captured:
            self.closed("a call")
        program = self._programs.get(True)
        if program is not None and program.takes_args:
            # fast path: floats and arrays of exactly the declared shapes and dtypes
            result = program.run_exact(args)
            if result is not None:
                return result
        if len(args) != len(self.params):
            raise LayoutError(f"function {self.name} takes {len(self.params)} argument(s) "
                              f"({', '.join(map(repr, self.params))}), got {len(args)}")
        flat = lay.flatten(self.params, args, f"function {self.name}")
        if any(isinstance(v, Expr) for v in flat):
            outs = call_nodes(self, flat)
        else:
            if program is not None and not program.takes_args:     # groups unpacked
                result = program.run_exact(flat)
                if result is not None:
                    return result
            outs = self.evaluate(flat)
        if isinstance(self.output_layout, lay.Leaf):
            return outs[0]
        return lay.unflatten([self.output_layout], outs)[0]

    def evaluate(self, flat_values: Sequence[Any], simplify: bool = True) -> List[Any]:
        """Output values (one per output leaf) at the input leaves' values.

        ``simplify=False`` runs the graph exactly as built (for checking the
        simplifier).  Both lower to a tape once and replay it afterwards.
        """
        where = f"function {self.name}"
        values = [lay.check_value_shape(leaf, v, where)
                  for leaf, v in zip(self.input_leaves, flat_values)]
        program = self._programs.get(simplify)
        if program is None:
            outputs = self.simplified_outputs() if simplify else self.expanded_outputs()
            program = LoweredProgram(self.inputs, outputs, values, elementwise=True)
            if simplify:            # __call__'s fast path returns pack(outputs)
                layout = self.output_layout
                program.set_packing(
                    (lambda outs: outs[0]) if isinstance(layout, lay.Leaf) else
                    tuple if all(isinstance(i, lay.Leaf) for i in layout.items) else
                    (lambda outs: lay.unflatten([layout], outs)[0]),
                    takes_args=all(isinstance(p, lay.Leaf) for p in self.params))
            out = program(values)           # its recorded values are these inputs
            self._programs[simplify] = program   # published only then (threads)
            return out
        return program(values)

    def expanded_outputs(self) -> List[Expr]:
        """The outputs with every call replaced by the callee's graph
        (``tapead.scaly.calls.expand_calls``; computed once)."""
        if self._expanded is None:
            self._expanded = expand_calls(self.outputs)
        return self._expanded

    def mapped_outputs(self) -> List[Expr]:
        """The outputs with the ordinary calls expanded and the mapped calls
        kept, one ``expr.vmap`` node each (what derivatives differentiate;
        computed once)."""
        if self._mapped is None:
            self._mapped = expand_calls(self.outputs, keep_mapped=True)
        return self._mapped

    def simplified_outputs(self) -> List[Expr]:
        """The expanded outputs after ``tapead.scaly.simplify`` (computed once).

        Long mapped calls of stages that run as scalar code stay one node
        each, evaluated stage after stage in C (``tapead.scaly.mapped``)."""
        if self._simplified is None:
            self._simplified = simplify(expand_calls(self.outputs,
                                                     keep_mapped=EVALUATION_KEEPS[0]))
        return self._simplified

    @property
    def n_nodes(self) -> int:
        """Distinct nodes of the graph (interning shares equal subexpressions)."""
        return len(topo_order(self.outputs))


# ---------------------------------------------------------------------------
# sc.function
# ---------------------------------------------------------------------------

def _is_l_style(item) -> bool:
    return isinstance(item, (lay.L, lay.G))


def function(*specs, outputs=None) -> Callable[[Callable], Function]:
    """Declare a Scaly Function (a decorator).

    Two declaration styles:

    * ``sc.function(in_layout, out_layout)`` with ``sc.L``/``sc.G``: the body
      takes one argument laid out as ``in_layout`` (a group is a tuple);
    * ``sc.function(sc.arg(...), ..., outputs=...)``: one positional parameter
      per ``sc.arg``/``sc.group``; ``outputs`` is an ``sc.arg`` or
      ``sc.group`` (inferred from the body's results when omitted).

    Shapes are ``()``, an int, a tuple or ``...`` (outputs only: inferred).

    Parameters
    ----------
    *specs : sc.L, sc.G, sc.arg or sc.group
        Either ``(in_layout, out_layout)`` or one ``sc.arg``/``sc.group`` per
        positional parameter.
    outputs : sc.arg or sc.group, optional
        The output layout of the ``sc.arg`` style.

    Returns
    -------
    callable
        A decorator turning the body into a :class:`Function` (the body runs
        once, on symbolic inputs).

    Examples
    --------
    >>> import numpy as np, tapead.scaly as sc
    >>> @sc.function(sc.G(sc.L("x", 2), sc.L("p", ())), sc.L("y", ...))
    ... def f(inputs):
    ...     x, p = inputs
    ...     return (x * p).sin()
    >>> print(f((np.array([0.0, 1.0]), 2.0)))
    [0.         0.90929743]
    >>> @sc.function(sc.arg("x", 2), sc.arg("p"), outputs=sc.arg("y", ...))
    ... def g(x, p):
    ...     return (x * x).sum() * p
    >>> print(g(np.array([1.0, 2.0]), 3.0))
    15.0
    """
    if specs and all(_is_l_style(s) for s in specs):
        if len(specs) > 2 or outputs is not None:
            raise LayoutError("sc.function(sc.L/G input layout, sc.L/G output layout): give "
                              "one input layout (group several with sc.G) and one output "
                              "layout")
        params, out_layout, style = [specs[0]], (specs[1] if len(specs) == 2 else None), "L"
    else:
        for s in specs:
            if not isinstance(s, (lay.Leaf, lay.Group)):
                raise LayoutError(f"sc.function takes layouts (sc.arg, sc.group, sc.L, "
                                  f"sc.G), not {s!r}")
        params, out_layout, style = list(specs), outputs, "arg"
    for leaf in lay.leaves(params):
        if leaf.type is None:
            raise LayoutError(f"input '{leaf.name}' needs a shape: only output shapes can "
                              "be inferred with ...")

    def decorate(body: Callable) -> Function:
        return trace(body, params, out_layout, style, getattr(body, "__name__", "f"))
    return decorate


def trace(body: Callable, params: Sequence[Any], out_layout: Any, style: str,
          name: str) -> Function:
    """Call ``body`` on symbolic inputs and wrap the result as a Function."""
    in_leaves = lay.leaves(params)
    inputs = [sym(leaf.name, leaf.type) for leaf in in_leaves]
    frame = tracing.begin()             # the sc.print nodes the body makes
    try:
        result = body(*lay.unflatten(params, inputs))
    finally:
        tracing.end(frame)
    if out_layout is None:
        out_layout = lay.infer_output_layout(result)
    where = f"function {name}"
    values = lay.flatten([out_layout], [result], f"{where} (its results)")
    outputs, resolved = [], {}
    for leaf, value in zip(lay.leaves([out_layout]), values):
        e = _output_expr(leaf, value, where)
        outputs.append(e)
        resolved[id(leaf)] = leaf.resolved(e.type) if leaf.type is None else leaf
    tracing.check_prints(frame, outputs, name)
    return Function(name, params, _resolve(out_layout, resolved), inputs, outputs, style)


def _output_expr(leaf: lay.Leaf, value: Any, where: str) -> Expr:
    if isinstance(value, (tuple, list)):
        raise LayoutError(f"{where}: output '{leaf.name}' is a single tensor but the body "
                          f"returned a {type(value).__name__}; declare a group of outputs")
    want = leaf.type
    e = as_expr(value) if isinstance(value, Expr) or want is None else \
        as_expr(np.broadcast_to(np.asarray(value, want.dtype), want.shape))
    if want is not None:
        if e.shape != want.shape:
            raise ScalyShapeError(f"{where}: output '{leaf.name}' is declared with shape "
                                  f"{want.shape} but the body returned shape {e.shape}")
        if e.dtype != want.dtype:
            if want.dtype == dtypes.bool_ or e.dtype == dtypes.bool_:
                raise LayoutError(f"{where}: output '{leaf.name}' is declared "
                                  f"{want.dtype_name} but the body returned "
                                  f"{e.type.dtype_name}")
    return e


def _resolve(layout: Any, resolved: Dict[int, lay.Leaf]) -> Any:
    if isinstance(layout, lay.Leaf):
        return resolved[id(layout)]
    return type(layout)(*(_resolve(item, resolved) for item in layout.items))


def derived(name: str, params: Sequence[Any], output_leaf: lay.Leaf, inputs: Sequence[Expr],
            outputs: Sequence[Expr], style: str) -> Function:
    """A Function built by a graph transformation (derivatives)."""
    return Function(name, params, output_leaf, inputs, outputs, style)


def leaf_like(style: str, name: str, ttype: TensorType) -> lay.Leaf:
    """A leaf of the declaration style of the Function being derived."""
    return (lay.L if style == "L" else lay.arg)(name, ttype)


__all__ = ["Function", "function", "derived", "leaf_like"]
