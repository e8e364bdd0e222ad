"""tapead: automatic differentiation on a compiled Wengert tape.

>>> import tapead as ta
>>> float(ta.grad(lambda x, y: x * y + ta.numpy.sin(x))(1.0, 2.0))
2.5403023058681398
"""
from tapead import _core  # noqa: F401
from tapead import numpy  # noqa: F401  (its protocol installs the rules into the core)
from tapead._core import Tape, Tracer, Dual  # noqa: F401
from tapead._tree import tree_flatten, tree_unflatten, tree_map  # noqa: F401
from tapead import tree_util  # noqa: F401
from tapead.errors import (GuardFlippedError, LeakedTracerError, MissingRuleError,  # noqa
                           NonDifferentiableError, NonScalarOutputError, ShapeError,
                           TapeReplayError, TapeadError, VmapFallbackError)
from tapead.testing import check_grads  # noqa: F401
from tapead.loops import checkpoint, scan, fori_loop  # noqa: F401
from tapead.control import cond, switch, while_loop  # noqa: F401
from tapead.online import checkpoint_cost  # noqa: F401
from tapead.implicit import custom_root, fixed_point  # noqa: F401
from tapead.custom import custom_jvp, custom_vjp  # noqa: F401
from tapead import nn, optim  # noqa: F401
from tapead.transforms import (grad, value_and_grad, jvp, vjp, jacfwd, jacrev,  # noqa: F401
                               hessian, hvp)
from tapead._prims.elementwise import stop_gradient  # noqa: F401
from tapead.vmap import vmap, vmap_stats  # noqa: F401
from tapead import vmap_transforms  # noqa: F401  (vmap of grad, jacfwd... run batched)
from tapead.jit import jit, record, Recording  # noqa: F401
from tapead import integrate, scipy  # noqa: F401
from tapead.sparse import jacobian_sparsity, sparse_jacobian, sparse_hessian  # noqa: F401

__version__ = "0.1.0"

