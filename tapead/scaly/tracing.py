"""Bookkeeping while a Function body is traced: the ``sc.print`` nodes it made.

``sc.print`` registers its node with the innermost body being traced
(``record_print``); when that body returns, ``check_prints`` refuses a print
that none of its outputs reach, since it would never run.
"""
from __future__ import annotations

import threading
from typing import List, Sequence

from tapead.scaly.expr import Expr
from tapead.scaly.graphs import topo_order

_frames = threading.local()


def begin() -> List[Expr]:
    """Start collecting the prints of a body being traced (one frame per body)."""
    stack = getattr(_frames, "stack", None)
    if stack is None:
        stack = _frames.stack = []
    frame: List[Expr] = []
    stack.append(frame)
    return frame


def end(frame: List[Expr]) -> None:
    """Stop collecting into ``frame`` (the innermost one)."""
    stack = _frames.stack
    if stack and stack[-1] is frame:
        stack.pop()


def tracing() -> bool:
    """Whether a Function body is being traced (in this thread)."""
    return bool(getattr(_frames, "stack", None))


def record_print(node: Expr) -> None:
    """Called by ``sc.print``: ``node`` belongs to the innermost traced body."""
    stack = getattr(_frames, "stack", None)
    if stack:
        stack[-1].append(node)


def check_prints(frame: List[Expr], outputs: Sequence[Expr], name: str) -> None:
    """A ValueError for a print of ``frame`` that ``outputs`` do not reach."""
    if not frame:
        return
    reached = {node.id for node in topo_order(list(outputs))}
    for node in frame:
        if node.id not in reached:
            raise ValueError(
                f"function {name}: sc.print({node.attrs['fmt']!r}, ...) is not used by any "
                "output, so it would never print; use the expression sc.print returns in "
                "the computation of an output")
