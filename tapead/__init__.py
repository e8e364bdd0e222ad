"""tapead: automatic differentiation on a compiled Wengert tape.

>>> import tapead as ta
>>> float(ta.grad(lambda x, y: x * y + ta.numpy.sin(x))(1.0, 2.0))
2.5403023058681398

The names below (``tapead.__all__``, listed in docs/api/index.rst) are the
public API; the package's other modules are its internals and may move.
"""
from tapead import _core  # noqa: F401  (the compiled tape, sweeps and boxes)
from tapead import numpy  # noqa: F401  (its protocol installs the rules into the core)
from tapead._core import Tape, Tracer, Dual
from tapead._tree import tree_flatten, tree_unflatten, tree_map
from tapead import errors, tree_util
from tapead.errors import (GuardFlippedError, LeakedTracerError, MissingRuleError,
                           NonDifferentiableError, NonScalarOutputError, ShapeError,
                           TapeReplayError, TapeadError, VmapFallbackError)
from tapead import testing
from tapead.testing import check_grads
from tapead.loops import checkpoint, scan, fori_loop
from tapead.control import cond, switch, while_loop
from tapead.online import checkpoint_cost
from tapead.implicit import custom_root, fixed_point
from tapead.custom import custom_jvp, custom_vjp
from tapead import nn, optim
from tapead.transforms import grad, value_and_grad, jvp, vjp, jacfwd, jacrev, hessian, hvp
from tapead._prims.elementwise import stop_gradient
from tapead.vmap import vmap, vmap_stats
from tapead import vmap_transforms as _vmap_transforms  # noqa: F401  (vmap of grad... run batched)
from tapead.jit import jit, record, Recording
from tapead import integrate, scipy
from tapead.sparse import jacobian_sparsity, sparse_jacobian, sparse_hessian

__version__ = "0.1.0"

__all__ = [
    # transforms
    "grad", "value_and_grad", "vjp", "jvp", "jacfwd", "jacrev", "hessian", "hvp",
    "stop_gradient", "vmap", "vmap_stats", "jit", "record", "Recording",
    # loops, control flow, checkpointing, custom rules
    "scan", "fori_loop", "checkpoint", "while_loop", "cond", "switch", "checkpoint_cost",
    "fixed_point", "custom_root", "custom_jvp", "custom_vjp",
    # sparse derivatives
    "jacobian_sparsity", "sparse_jacobian", "sparse_hessian",
    # pytrees
    "tree_flatten", "tree_unflatten", "tree_map",
    # checking derivatives
    "check_grads",
    # the tape and traced values
    "Tape", "Tracer", "Dual",
    # errors
    "TapeadError", "MissingRuleError", "NonDifferentiableError", "LeakedTracerError",
    "GuardFlippedError", "TapeReplayError", "NonScalarOutputError", "ShapeError",
    "VmapFallbackError",
    # public subpackages
    "numpy", "scipy", "integrate", "nn", "optim", "tree_util", "errors", "testing",
]
