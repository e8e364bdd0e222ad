"""Contractions: einsum, tensordot, inner, kron (and ``dot`` above 2-d).

Every contraction here is one *multilinear* primitive described by explicit
einsum subscripts (no ellipsis, no implicit output: the user-facing
functions normalise them first).  One rule serves every operand:

* JVP for operand k: the same einsum with operand k replaced by its tangent;
* VJP for operand k: the *transposed* einsum, which contracts the cotangent
  (labelled like the output) with the other operands into operand k's
  labels.  Two cases need a constant operand: a label that occurs only in
  operand k (summed out, or a broadcast size-1 axis) gets a vector of ones
  that broadcasts the cotangent back along it; a label repeated inside
  operand k (``'ii->'``, ``'ii->i'``) gets a fresh label tied to the first
  by an identity matrix, which puts the cotangent on the diagonal.

The rules call ``einsum`` itself, so they are differentiable again.  The
primal of ``tensordot``/``inner``/``dot`` is numpy's own function (BLAS); only
their rules go through einsum.
"""
from __future__ import annotations

import string

import numpy as np

from tapead._core import Box, bind, is_complex, lanes_of
from tapead import patterns
from tapead._prims import batching
from tapead._prims.base import Primitive
from tapead.errors import ShapeError
from tapead._prims.elementwise import real
from tapead._prims.shape import reshape, swapaxes

LETTERS = string.ascii_uppercase + string.ascii_lowercase   # numpy's 52 labels


def _any_box(xs) -> bool:
    return any(isinstance(x, Box) for x in xs)


def _dtype_of(*xs) -> np.dtype:
    """The floating dtype of the array values among ``xs`` (Python floats are weak)."""
    dts = [np.result_type(lanes_of(x)) for x in xs
           if x is not None and not isinstance(x, (float, int))]
    dt = np.result_type(*dts) if dts else np.dtype(np.float64)
    return dt if np.issubdtype(dt, np.floating) else np.dtype(np.float64)


def _fresh(used):
    """Labels not in ``used``, in order."""
    for c in LETTERS:
        if c not in used:
            yield c
    raise ValueError("einsum: more than 52 distinct labels are needed; numpy's einsum "
                     "allows at most 52 (A-Z, a-z)")


def _split(subscripts: str):
    ins, out = subscripts.split("->")
    return ins.split(","), out


# ---------------------------------------------------------------------------
# subscripts: numpy's forms -> explicit labels, one per axis
# ---------------------------------------------------------------------------

def _sublist_to_str(sub) -> str:
    out = []
    for s in sub:
        if s is Ellipsis:
            out.append("...")
        elif isinstance(s, (int, np.integer)) and 0 <= s < 52:
            out.append(LETTERS[s])
        else:
            raise ValueError(f"einsum: a sublist holds integers in [0, 52) or Ellipsis; got {s!r}")
    return "".join(out)


def _interleaved(args):
    """einsum(op0, sub0, op1, sub1, ..., [subout]) -> (subscripts, operands)."""
    ops, subs = list(args[0::2]), [_sublist_to_str(s) for s in args[1::2]]
    out = None
    if len(ops) > len(subs):                 # a trailing output sublist
        out = _sublist_to_str(ops.pop())
    s = ",".join(subs)
    return (s + "->" + out if out is not None else s), ops


def normalize_subscripts(subscripts: str, shapes) -> str:
    """Explicit ``'ab,bc->ac'`` form: ellipses expanded, output spelled out.

    Ellipsis axes get unused labels, right-aligned across operands as numpy
    broadcasts them.  A size-1 axis whose label has a larger size in another
    operand (numpy broadcasts it) gets a label of its own, so that every
    label has one size.
    """
    s = subscripts.replace(" ", "")
    if "->" in s:
        ins_s, out_s = s.split("->")
    else:
        ins_s, out_s = s, None
    terms = ins_s.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"einsum: the subscripts {subscripts!r} name {len(terms)} operands "
                         f"but {len(shapes)} were given")
    used = set(c for c in s if c.isalpha())
    bad = set(s) - used - set(".,->")
    if bad:
        raise ValueError(f"einsum: invalid subscript characters {sorted(bad)} in {subscripts!r}; "
                         "use letters A-Z, a-z and '...'")
    fresh = _fresh(used)
    n_ell = 0
    for t, shp in zip(terms, shapes):
        if "..." in t:
            n_ell = max(n_ell, len(shp) - len(t.replace("...", "")))
    ell = "".join(next(fresh) for _ in range(n_ell))
    labels = []
    for t, shp in zip(terms, shapes):
        if "..." in t:
            k = len(shp) - len(t.replace("...", ""))
            if k < 0:
                raise ShapeError(f"einsum: operand of shape {shp} has fewer axes than "
                                 f"the subscripts {t!r} name")
            t = t.replace("...", ell[n_ell - k:] if k else "")
        if len(t) != len(shp):
            raise ShapeError(f"einsum: subscripts {t!r} name {len(t)} axes but the operand "
                             f"has shape {shp}; add '...' or fix the subscripts")
        labels.append(list(t))
    if out_s is None:                        # implicit mode: numpy's order
        counts = {}
        for t in labels:
            for c in t:
                if c not in ell:
                    counts[c] = counts.get(c, 0) + 1
        out_s = ell + "".join(sorted(c for c, n in counts.items() if n == 1))
    else:
        out_s = out_s.replace("...", ell)
    size = {}
    for t, shp in zip(labels, shapes):
        for c, n in zip(t, shp):
            size[c] = max(size.get(c, 1), n)
    for t, shp in zip(labels, shapes):       # broadcast size-1 axes: own label
        for i, (c, n) in enumerate(zip(t, shp)):
            if n == 1 and size[c] != 1:
                t[i] = next(fresh)
    return ",".join("".join(t) for t in labels) + "->" + out_s


# ---------------------------------------------------------------------------
# the multilinear rules, shared by every contraction primitive
# ---------------------------------------------------------------------------

def _rule_optimize(optimize):
    # an explicit path names the user's operands; the rules have others
    return optimize if isinstance(optimize, (bool, str)) else True


def contraction_cotangent(k, g, ops, subscripts, optimize=False):
    """The cotangent of operand ``k``: the transposed einsum (see the module doc)."""
    ins, out = _split(subscripts)
    target_labels = ins[k]
    shape_k = np.shape(ops[k])
    dtype = _dtype_of(g, *[o for j, o in enumerate(ops) if j != k])
    terms, operands = [out], [g]
    for j, (lab, op) in enumerate(zip(ins, ops)):
        if j != k:
            terms.append(lab)
            operands.append(op)
    present = set(out).union(*[set(ins[j]) for j in range(len(ins)) if j != k])
    fresh = _fresh(set(subscripts))
    seen, target = set(), []
    for c, n in zip(target_labels, shape_k):
        if c in seen:                        # repeated label: onto the diagonal
            f = next(fresh)
            terms.append(c + f)
            operands.append(np.eye(n, dtype=dtype))
            target.append(f)
            continue
        seen.add(c)
        target.append(c)
        if c not in present:                 # only in operand k: broadcast back
            terms.append(c)
            operands.append(np.ones(n, dtype=dtype))
    ct = einsum(",".join(terms) + "->" + "".join(target), *operands,
                optimize=_rule_optimize(optimize))
    if is_complex(ct) and not is_complex(ops[k]):     # a real operand promoted to complex
        ct = real(ct)
    return ct


def _vjp(k, g, ans, *ops, subscripts, optimize=False, **_):
    return contraction_cotangent(k, g, ops, subscripts, optimize)


def _jvp(k, t, ans, *ops, subscripts, optimize=False, **_):
    args = list(ops)
    args[k] = t
    return einsum(subscripts, *args, optimize=_rule_optimize(optimize))


def _jvp_batched(tans, ans, vals, params, K):
    subscripts = params["subscripts"]
    ins, out = _split(subscripts)
    z = next(_fresh(set(subscripts)))
    total = None
    for k, t in enumerate(tans):
        if t is None:
            continue
        terms = [z + lab if j == k else lab for j, lab in enumerate(ins)]
        args = [t if j == k else v for j, v in enumerate(vals)]
        c = einsum(",".join(terms) + "->" + z + out, *args,
                   optimize=_rule_optimize(params.get("optimize", False)))
        total = c if total is None else total + c
    if total is None:
        return np.zeros((K,) + np.shape(ans), dtype=np.result_type(ans))
    return total


def contraction(name, impl, unary=False):
    """A multilinear primitive whose parameter ``subscripts`` describes it.

    ``impl(*operands, subscripts=..., **params)`` computes the value (numpy's
    own function); the rules are the einsum rules above.  A one-operand
    contraction keeps nothing for its VJP; otherwise every operand is kept
    (each one's cotangent reads the others).
    """
    prim = Primitive(name, impl, saves=() if unary else None)
    prim.defvjp_any(_vjp)
    prim.defjvp_any(_jvp)
    prim.defbatched(_jvp_batched)
    prim.defsparsity(patterns.CONTRACTION)
    prim.defvmap(_contraction_vmap)
    prim.complex_ok = True        # multilinear, no conjugates: JAX's convention holds
    return prim


def _contraction_vmap(args, bdims, subscripts, optimize=False, **params):
    """vmap of a contraction: one einsum with a fresh label for the lanes,
    in front of every batched operand and of the output."""
    ins, out = subscripts.split("->")
    terms = ins.split(",")
    lane = next(_fresh(set(subscripts)))
    new_terms, ops = [], []
    for t, a, d in zip(terms, args, bdims):
        if d is None:
            new_terms.append(t)
            ops.append(a)
        else:
            new_terms.append(lane + t)
            ops.append(batching.to_front(a, d))
    prim = einsum1_p if len(ops) == 1 else einsum_p
    return bind(prim, *ops, subscripts=",".join(new_terms) + "->" + lane + out,
                optimize=optimize), 0


# ---------------------------------------------------------------------------
# einsum
# ---------------------------------------------------------------------------

def _einsum_impl(*ops, subscripts, optimize=False):
    return np.einsum(subscripts, *ops, optimize=optimize)


einsum_p = contraction("einsum", _einsum_impl)
einsum1_p = contraction("einsum", _einsum_impl, unary=True)


def einsum(*args, optimize=False, **kwargs):
    """``np.einsum`` with derivatives, for every operand.

    Parameters
    ----------
    subscripts : str
        numpy's subscripts: explicit (``'ij,jk->ik'``), implicit
        (``'ij,jk'``: the output is the labels used once, in alphabetical
        order), with ``'...'`` for broadcast axes, repeated labels for traces
        and diagonals (``'ii->'``, ``'ii->i'``).  The interleaved form
        ``einsum(x, [0, 1], y, [1, 2], [0, 2])`` works too.
    *operands : arrays (traced or not)
    optimize : bool, str or list
        Passed to ``np.einsum`` (contraction order); the derivative rules
        use the same strategy (an explicit path becomes ``True`` there).

    Returns
    -------
    array
        Same value as ``np.einsum``.
    """
    if args and not isinstance(args[0], str):
        subscripts, ops = _interleaved(args)
    else:
        subscripts, ops = args[0], list(args[1:])
    if not _any_box(ops):
        return np.einsum(subscripts, *ops, optimize=optimize, **kwargs)
    if kwargs:
        raise TypeError(f"einsum on traced values does not take {sorted(kwargs)}; "
                        "cast the inputs with astype and assign the result instead of out=")
    norm = normalize_subscripts(subscripts, [np.shape(o) for o in ops])
    prim = einsum1_p if len(ops) == 1 else einsum_p
    return bind(prim, *ops, subscripts=norm, optimize=optimize)


# ---------------------------------------------------------------------------
# tensordot, inner, dot (n-d): numpy computes, einsum differentiates
# ---------------------------------------------------------------------------

def _tensordot_impl(a, b, subscripts, axes):
    return np.tensordot(a, b, axes)


tensordot_p = contraction("tensordot", _tensordot_impl)


def _tensordot_axes(na, nb, axes):
    if isinstance(axes, (int, np.integer)):
        if axes < 0 or axes > min(na, nb):
            raise ShapeError(f"tensordot: axes={axes} but the operands have {na} and {nb} axes")
        return list(range(na - axes, na)), list(range(axes))
    try:
        ax_a, ax_b = axes
    except (TypeError, ValueError):
        raise ValueError("tensordot: axes is an int N (last N axes of a with first N of b) "
                         f"or a pair (axes_a, axes_b); got {axes!r}") from None
    ax_a = [ax_a] if isinstance(ax_a, (int, np.integer)) else list(ax_a)
    ax_b = [ax_b] if isinstance(ax_b, (int, np.integer)) else list(ax_b)
    if len(ax_a) != len(ax_b):
        raise ShapeError(f"tensordot: axes_a {ax_a} and axes_b {ax_b} must have the same length")
    return [int(i) % na for i in ax_a], [int(i) % nb for i in ax_b]


def tensordot(a, b, axes=2):
    """``np.tensordot`` with derivatives.

    ``axes`` is an int N (the last N axes of ``a`` against the first N of
    ``b``) or a pair of axis lists.  The result has ``a``'s free axes, then
    ``b``'s.

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> a, b = np.arange(6.0).reshape(2, 3), np.ones((3, 4))
    >>> ga = ta.grad(lambda a: np.tensordot(a, b, axes=1).sum())(a)    # b's row sums
    >>> print(ga)
    [[4. 4. 4.]
     [4. 4. 4.]]
    """
    if not _any_box((a, b)):
        return np.tensordot(a, b, axes)
    sa, sb = np.shape(a), np.shape(b)
    ax_a, ax_b = _tensordot_axes(len(sa), len(sb), axes)
    for i, j in zip(ax_a, ax_b):
        if sa[i] != sb[j]:
            raise ShapeError(f"tensordot: axis {i} of a (size {sa[i]}) does not match axis "
                             f"{j} of b (size {sb[j]}); shapes {sa} and {sb}")
    la = LETTERS[:len(sa)]
    fresh = iter(LETTERS[len(sa):])
    lb = [None] * len(sb)
    for i, j in zip(ax_a, ax_b):
        lb[j] = la[i]
    lb = "".join(c if c is not None else next(fresh) for c in lb)
    out = "".join(c for i, c in enumerate(la) if i not in ax_a) + \
        "".join(c for j, c in enumerate(lb) if j not in ax_b)
    return bind(tensordot_p, a, b, subscripts=f"{la},{lb}->{out}", axes=(ax_a, ax_b))


inner_p = contraction("inner", lambda a, b, subscripts: np.inner(a, b))


def inner(a, b):
    """``np.inner`` with derivatives: a sum over the last axes of both."""
    if not _any_box((a, b)):
        return np.inner(a, b)
    sa, sb = np.shape(a), np.shape(b)
    if not sa or not sb:
        return a * b
    if sa[-1] != sb[-1]:
        raise ShapeError(f"inner: the last axes must match; got shapes {sa} and {sb}")
    la = LETTERS[:len(sa)]
    lb = LETTERS[len(sa):len(sa) + len(sb) - 1] + la[-1]
    return bind(inner_p, a, b, subscripts=f"{la},{lb}->{la[:-1]}{lb[:-1]}")


ndot_p = contraction("dot", lambda a, b, subscripts: np.dot(a, b))


def dot_nd(a, b):
    """``np.dot`` above 2-d: the last axis of ``a`` against the second-to-last of ``b``."""
    sa, sb = np.shape(a), np.shape(b)
    kb = -1 if len(sb) == 1 else -2
    if sa[-1] != sb[kb]:
        raise ShapeError(f"dot: shapes {sa} and {sb} are not aligned (last axis of a "
                         "against the second-to-last of b)")
    la = LETTERS[:len(sa)]
    lb = list(LETTERS[len(sa):len(sa) + len(sb)])
    lb[kb] = la[-1]
    lb = "".join(lb)
    out = la[:-1] + "".join(c for c in lb if c != la[-1])
    return bind(ndot_p, a, b, subscripts=f"{la},{lb}->{out}")


# ---------------------------------------------------------------------------
# kron: an outer product of interleaved axes, reshaped
# ---------------------------------------------------------------------------

def kron(a, b):
    """``np.kron`` with derivatives (any number of axes, like numpy)."""
    if not _any_box((a, b)):
        return np.kron(a, b)
    sa, sb = np.shape(a), np.shape(b)
    if not sa or not sb:
        return a * b
    nd = max(len(sa), len(sb))
    sa = (1,) * (nd - len(sa)) + sa
    sb = (1,) * (nd - len(sb)) + sb
    # a[i, j] b[k, l] at [i, k, j, l], then merge the pairs
    ea = reshape(a, tuple(x for n in sa for x in (n, 1)))
    eb = reshape(b, tuple(x for n in sb for x in (1, n)))
    return reshape(ea * eb, tuple(m * n for m, n in zip(sa, sb)))


# ---------------------------------------------------------------------------
# numpy.linalg's array-API helpers (last two axes; tapead.numpy.linalg names)
# ---------------------------------------------------------------------------

def linalg_trace(x, /, *, offset=0, dtype=None):
    """``np.linalg.trace``: the trace of the last two axes (offset 0 on tracers).

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> print(ta.grad(lambda x: np.linalg.trace(x @ x))(np.array([[1.0, 2.0], [3.0, 4.0]])))
    [[2. 6.]
     [4. 8.]]
    """
    if not _any_box((x,)):
        return np.linalg.trace(x, offset=offset, dtype=dtype)
    if offset or dtype is not None:
        raise ValueError("linalg.trace of a traced value takes offset=0 and no dtype; "
                         "slice first (x[..., :-k, k:] for offset k)")
    return einsum("...ii->...", x)


def linalg_diagonal(x, /, *, offset=0):
    """``np.linalg.diagonal``: the diagonal of the last two axes (offset 0 on tracers).

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> print(ta.grad(lambda x: np.linalg.diagonal(x).prod())(np.array([[2.0, 9.0], [9.0, 5.0]])))
    [[5. 0.]
     [0. 2.]]
    """
    if not _any_box((x,)):
        return np.linalg.diagonal(x, offset=offset)
    if offset:
        raise ValueError("linalg.diagonal of a traced value takes offset=0; slice first "
                         "(x[..., :-k, k:] for offset k)")
    return einsum("...ii->...i", x)


def matrix_transpose(x, /):
    """``np.linalg.matrix_transpose``: swap the last two axes.

    Examples
    --------
    >>> import numpy as np, tapead as ta
    >>> ta.jacfwd(np.linalg.matrix_transpose)(np.ones((2, 3))).shape     # (3, 2) + (2, 3)
    (3, 2, 2, 3)
    """
    if np.ndim(x) < 2:
        raise ShapeError(f"matrix_transpose needs at least 2 axes; got shape {np.shape(x)}")
    return swapaxes(x, -1, -2) if _any_box((x,)) else np.linalg.matrix_transpose(x)


#: numpy functions (NEP 18) this module implements for tracers
NUMPY_FUNCTIONS = {np.einsum: einsum, np.tensordot: tensordot, np.inner: inner,
                   np.kron: kron,
                   np.linalg.tensordot: lambda a, b, /, *, axes=2: tensordot(a, b, axes),
                   np.linalg.trace: linalg_trace, np.linalg.diagonal: linalg_diagonal,
                   np.linalg.matrix_transpose: matrix_transpose}
__all__ = ["einsum", "tensordot", "inner", "kron"]
