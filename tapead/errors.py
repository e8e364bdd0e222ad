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


class VmapFallbackError(TapeadError, RuntimeError):
    """Under ``TAPEAD_STRICT_VMAP=1``: ``vmap`` would run a primitive (or the
    whole function) once per lane instead of once on the stacked lanes."""


# -- control signals of vmap's batch trace (BaseException: a user's
# ``except Exception`` must not swallow them; vmap catches them) -------------

class BatchSplit(BaseException):
    """``bool()`` of a batched value whose lanes disagree: vmap reruns the
    function on each group of agreeing lanes.  ``trace`` is the batch trace,
    ``lanes`` the boolean value of every lane."""

    def __init__(self, trace, lanes):
        super().__init__("the lanes of a batched value disagree")
        self.trace = trace
        self.lanes = lanes


class BatchConcreteRead(BaseException):
    """Code read one value out of a batched value (``float()``, an index, a
    rule inspecting values): vmap reruns the function once per lane."""

    def __init__(self, trace, what):
        super().__init__(f"{what} of a batched value")
        self.trace = trace
        self.what = what


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


class NativeCompileError(TapeadError):
    """``ta.jit(..., strict=True)``: a fused part of a recording has no native
    kernel (its operations have no C lowering that gives numpy's bits here, or
    no C compiler was found)."""
