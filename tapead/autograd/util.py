"""autograd's ``autograd.util``: argument substitution and the old
``quick_grad_check``."""
from __future__ import annotations

from tapead.autograd._subst import func, subval, subvals  # noqa: F401
from tapead.autograd.test_util import check_grads

__all__ = ["subval", "subvals", "func", "quick_grad_check"]


def quick_grad_check(fun, arg0, extra_args=(), kwargs=None, verbose=True, eps=1e-4,
                     rtol=1e-4, atol=1e-6, rs=None):
    """autograd's old first-order reverse-mode check of ``fun`` at ``arg0``
    (deprecated there too): ``check_grads(..., modes=["rev"], order=1)``."""
    kwargs = {} if kwargs is None else kwargs
    check_grads(lambda a: fun(a, *extra_args, **kwargs), modes=["rev"], order=1)(arg0)
