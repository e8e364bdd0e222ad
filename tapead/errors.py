"""Every exception tapead raises on purpose, in one place.

Each message says what was wrong and what to do about it.
"""


class TapeadError(Exception):
    """Base class of tapead's errors."""


class MissingRuleError(TapeadError, NotImplementedError):
    """A primitive has no rule for the requested transform."""


class NonDifferentiableError(TapeadError, TypeError):
    """A numpy function was called on a tracer and tapead has no rule for it."""


class LeakedTracerError(TapeadError, RuntimeError):
    """A traced value was used after its transform finished."""


class GuardFlippedError(TapeadError, RuntimeError):
    """Replaying a tape at new inputs would take a different branch."""


class TapeReplayError(TapeadError, ValueError):
    """A recorded tape was replayed with inputs of the wrong kind or shape."""


class NonScalarOutputError(TapeadError, TypeError):
    """``grad`` of a function whose output is not a scalar."""


class ShapeError(TapeadError, ValueError):
    """Arrays whose shapes do not fit together."""


# -- the graph API (tapead.scaly re-exports these under sc.*) -------------------

class SymbolicBoolError(TapeadError, TypeError):
    """A Python ``if``/``while``/``and``/``float()`` on a symbolic Scaly value."""


class UnknownNameError(TapeadError, ValueError):
    """A derivative request names an input or output the Function lacks."""


class LayoutError(TapeadError, TypeError):
    """Arguments or results that do not match a Function's declared layout."""


class ScalyShapeError(ShapeError):
    """A value or expression whose shape does not fit a Scaly declaration."""


class NonScalarGradientError(NonScalarOutputError):
    """``sc.gradient`` of an output with more than one element."""
