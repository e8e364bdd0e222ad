"""Walking Scaly expression graphs, iteratively (deep graphs must not hit the
recursion limit): ``topo_order`` lists the nodes operands first (the order of
the listings' numbers), ``rebuild`` rewrites a graph bottom-up, ``substitute``
replaces nodes by id.
"""
from __future__ import annotations

from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from tapead.scaly.expr import Expr, make_node



def topo_order(outputs: Iterable[Expr]) -> List[Expr]:
    """Nodes reachable from ``outputs``, operands before users.

    Depth-first post-order, visiting outputs and operands in order; the
    listing numbers follow this order.
    """
    order: List[Expr] = []
    done = set()
    for root in outputs:
        if root.id in done:
            continue
        stack = [(root, 0)]
        done.add(root.id)
        while stack:
            node, k = stack[-1]
            if k < len(node.operands):
                stack[-1] = (node, k + 1)
                child = node.operands[k]
                if child.id not in done:
                    done.add(child.id)
                    stack.append((child, 0))
            else:
                stack.pop()
                order.append(node)
    return order


def rebuild(outputs: Sequence[Expr], replace: Callable[[Expr, Tuple[Expr, ...]], Expr],
            seed: Optional[Dict[int, Expr]] = None) -> List[Expr]:
    """Rewrite a DAG bottom-up: ``replace(node, new_operands) -> new node``.

    ``seed`` maps node ids to fixed replacements (e.g. inputs to arguments).
    """
    new: Dict[int, Expr] = dict(seed or {})
    for node in topo_order(outputs):
        if node.id in new:
            continue
        operands = tuple(new[o.id] for o in node.operands)
        new[node.id] = replace(node, operands)
    return [new[o.id] for o in outputs]


def same_op(node: Expr, operands: Tuple[Expr, ...]) -> Expr:
    """``node``'s op and attributes on new operands (itself if unchanged)."""
    if all(a is b for a, b in zip(operands, node.operands)):
        return node
    return make_node(node.op, operands, node.attrs)


def substitute(outputs: Sequence[Expr], mapping: Dict[int, Expr]) -> List[Expr]:
    """``outputs`` with the nodes whose ids are keys of ``mapping`` replaced."""
    return rebuild(outputs, same_op, mapping)
