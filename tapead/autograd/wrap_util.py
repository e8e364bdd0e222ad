"""autograd's ``wrap_util``: turning an operator of one argument into one of
any argument (``argnum``), and naming the wrappers."""
from __future__ import annotations

import functools
from contextlib import suppress

from tapead.autograd._subst import subvals

__all__ = ["unary_to_nary", "wraps", "wrap_nary_f", "get_name", "get_doc"]


def get_name(f):
    return getattr(f, "__name__", "[unknown name]")


def get_doc(f):
    return getattr(f, "__doc__", "")


def wraps(fun, namestr="{fun}", docstr="{doc}", **kwargs):
    """A decorator naming its function after ``fun`` (autograd's formats)."""
    def _wraps(f):
        with suppress(AttributeError, KeyError, ValueError):
            f.__name__ = namestr.format(fun=get_name(fun), **kwargs)
            f.__doc__ = docstr.format(fun=get_name(fun), doc=get_doc(fun), **kwargs)
        return f
    return _wraps


def wrap_nary_f(fun, op, argnum):
    namestr = "{op}_of_{fun}_wrt_argnum_{argnum}"
    docstr = ("    {op} of function {fun} with respect to argument number {argnum}. Takes the\n"
              "    same arguments as {fun} but returns the {op}.\n    ")
    return wraps(fun, namestr, docstr, op=get_name(op), argnum=argnum)


def unary_to_nary(unary_operator):
    """``unary_operator(fun, x, *extra)`` -> ``nary(fun, argnum=0, *extra)``, whose
    result takes ``fun``'s arguments: ``argnum`` (an int, or a tuple/list of
    them) says which positional arguments form ``x`` (a tuple for several)."""
    @functools.wraps(unary_operator)
    def nary_operator(fun, argnum=0, *nary_op_args, **nary_op_kwargs):
        if type(argnum) not in (int, tuple, list):
            raise TypeError(f"{get_name(unary_operator)}: argnum must be an int or a tuple of "
                            f"ints, got {argnum!r}")

        @wrap_nary_f(fun, unary_operator, argnum)
        def nary_f(*args, **kwargs):
            def unary_f(x):
                if isinstance(argnum, int):
                    subargs = subvals(args, [(argnum, x)])
                else:
                    subargs = subvals(args, zip(argnum, x))
                return fun(*subargs, **kwargs)
            with suppress(AttributeError):
                unary_f.__name__ = get_name(fun)
            if isinstance(argnum, int):
                x = args[argnum]
            else:
                x = tuple(args[i] for i in argnum)
            return unary_operator(unary_f, x, *nary_op_args, **nary_op_kwargs)
        return nary_f
    return nary_operator
