"""autograd's API on tapead: change ``autograd`` to ``tapead.autograd`` in the
imports and a program runs on tapead's tape.

``grad``, ``value_and_grad``, ``elementwise_grad``, ``jacobian``, ``hessian``,
``make_vjp``, ``make_jvp``, ``make_hvp``, ... take autograd's arguments
(``fun, argnum=0``) and return what autograd returns;
``tapead.autograd.numpy``, ``.scipy``, ``.extend``, ``.misc``, ``.builtins``
and ``.test_util`` mirror autograd's modules.  See ``docs/autograd.md``.

>>> import tapead.autograd.numpy as np
>>> from tapead.autograd import grad, value_and_grad
>>> value_and_grad(lambda x, y: np.sin(x) * y, 1)(0.5, 2.0)
(np.float64(0.958851077208406), np.float64(0.479425538604203))
"""
from tapead.autograd.builtins import dict, isinstance, list, tuple, type  # noqa: F401,A004
from tapead.autograd.core import (def_linear, defjvp, defjvp_argnum,  # noqa: F401
                                  defjvp_argnums, defvjp, defvjp_argnum, defvjp_argnums,
                                  VSpace, vspace)
from tapead.autograd.differential_operators import (  # noqa: F401
    checkpoint, deriv, elementwise_grad, grad, grad_and_aux, grad_named, hessian,
    hessian_tensor_product, hessian_vector_product, holomorphic_grad, jacobian, make_ggnvp,
    make_hvp, make_jvp, make_vjp, multigrad_dict, tensor_jacobian_product, value_and_grad,
    vector_jacobian_product)
from tapead.autograd.core import primitive_with_deprecation_warnings as primitive  # noqa: F401
from tapead.autograd.tracer import Box, notrace_primitive  # noqa: F401

__all__ = ["Box", "VSpace", "checkpoint", "def_linear", "defjvp", "defjvp_argnum",
           "defjvp_argnums", "defvjp", "defvjp_argnum", "defvjp_argnums", "deriv", "dict",
           "elementwise_grad", "grad", "grad_and_aux", "grad_named", "hessian",
           "hessian_tensor_product", "hessian_vector_product", "holomorphic_grad",
           "isinstance", "jacobian", "list", "make_ggnvp", "make_hvp", "make_jvp", "make_vjp",
           "multigrad_dict", "notrace_primitive", "primitive", "tensor_jacobian_product",
           "tuple", "type", "value_and_grad", "vector_jacobian_product", "vspace"]
