"""The exceptions the graph API raises on purpose.

They subclass tapead's own classes (``tapead.errors``), so ``except
tapead.TapeadError`` catches them too.  Every message says what was wrong and
what to do instead.
"""
from tapead.errors import NonScalarOutputError, ShapeError, TapeadError


class SymbolicBoolError(TapeadError, TypeError):
    """A Python ``if``/``while``/``and``/``float()`` on a symbolic value."""


class UnknownNameError(TapeadError, ValueError):
    """A derivative request names an input or output the Function lacks."""


class LayoutError(TapeadError, TypeError):
    """Arguments or results that do not match a Function's declared layout."""


class ScalyShapeError(ShapeError):
    """A value or expression whose shape does not fit a declaration."""


class NonScalarGradientError(NonScalarOutputError):
    """``sc.gradient`` of an output with more than one element."""


__all__ = ["SymbolicBoolError", "UnknownNameError", "LayoutError", "ScalyShapeError",
           "NonScalarGradientError", "TapeadError"]
