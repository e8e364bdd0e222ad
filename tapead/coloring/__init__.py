"""Graph coloring for sparse Jacobians and Hessians, and recovery.

A sparse derivative is computed from a few directional derivatives: the
columns are split into groups (colors), one seed direction per group is
pushed through forward mode, and the entries are read back from the
compressed product.

* :func:`column_coloring` -- greedy distance-2 coloring of the column
  intersection graph (Jacobians, ``B = J @ S``).
* :func:`star_coloring` -- Gebremedhin, Tarafdar, Manne & Pothen (2007),
  Algorithm 4.1 (symmetric patterns, direct recovery).
* :func:`acyclic_coloring` -- the same paper, Algorithm 3.1 (fewer colors,
  recovery by substitution along 2-colored trees).
* :func:`jacobian_recovery`, :func:`star_recovery`, :func:`acyclic_recovery`
  -- built once per pattern, then ``recover(B)`` gives the nonzero values in
  pattern order (CSR, row-major).
* :func:`is_valid_column_coloring`, :func:`is_valid_star_coloring`,
  :func:`is_valid_acyclic_coloring` -- independent numpy checkers.

The package: the C kernels (``tapead.coloring._kernels``), the greedy
colorings and checkers (:mod:`tapead.coloring.greedy`), the recoveries
(:mod:`tapead.coloring.recovery`); patterns are validated once and converted
to int32 CSR/CSC (``tapead.coloring._pattern``).  A *pattern* is a ``scipy.sparse``
matrix or array (every stored entry is structural, even an explicit zero) or
a dense array (its nonzeros).
"""
from __future__ import annotations

from tapead.coloring.greedy import (AUTO, AUTO_WORK_LIMIT, ORDERS, Colors,  # noqa: F401
                                    acyclic_coloring, color_groups, column_coloring,
                                    is_valid_acyclic_coloring, is_valid_column_coloring,
                                    is_valid_star_coloring, star_coloring)
from tapead.coloring.recovery import (AcyclicRecovery, JacobianRecovery, StarRecovery,
                                      acyclic_recovery, jacobian_recovery, star_recovery)

__all__ = [
    "ORDERS",
    "AUTO",
    "column_coloring",
    "star_coloring",
    "acyclic_coloring",
    "color_groups",
    "jacobian_recovery",
    "star_recovery",
    "acyclic_recovery",
    "JacobianRecovery",
    "StarRecovery",
    "AcyclicRecovery",
    "is_valid_column_coloring",
    "is_valid_star_coloring",
    "is_valid_acyclic_coloring",
]
