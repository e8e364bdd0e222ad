"""The exceptions the graph API raises on purpose (defined in ``tapead.errors``,
where every tapead exception lives; re-exported here and as ``sc.*``).

They subclass ``tapead.errors.TapeadError``, so ``except TapeadError``
catches them too.  Every message says what was wrong and what to do instead.
"""
from tapead.errors import (LayoutError, NonScalarGradientError, ScalyShapeError,
                           SymbolicBoolError, TapeadError, UnknownNameError)

__all__ = ["SymbolicBoolError", "UnknownNameError", "LayoutError", "ScalyShapeError",
           "NonScalarGradientError", "TapeadError"]
