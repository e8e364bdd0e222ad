"""Op-spec rows of the elementwise functions built from other primitives:
fmax/fmin and clip (from maximum/minimum).

Domains keep every point smooth: fmax/fmin draw their arguments from
disjoint lattices (no ties), clip's points stay away from its bounds.
"""
from __future__ import annotations

from opspecs import POS, REAL, AwayFromZero, Lattice
from opspecs import _array_op as A

B2 = (("array", ((2, 3), (2, 3))), ("bcast_row", ((3,), (2, 3))))
# constant powers, computed by multiplication (sqrt for 0.5) in the scalar
# kernel and the array rules: a Python float takes the C kernel (OP_POWC)
S_A = (("scalar", ((),)), ("array", ((2, 3),)))

ARRAY_OPS = [
    A("fmax", lambda m, x, y: m.fmax(x, y), *B2,
      domain=(Lattice(0.0, 0.4), Lattice(0.6, 1.0))),
    A("fmin", lambda m, x, y: m.fmin(x, y), *B2,
      domain=(Lattice(0.0, 0.4), Lattice(0.6, 1.0))),
    A("pow_2", lambda m, x: x ** 2, *S_A, domain=(REAL,)),
    A("pow_3", lambda m, x: x ** 3, *S_A, domain=(REAL,)),
    A("pow_4", lambda m, x: x ** 4, *S_A, domain=(REAL,)),
    A("pow_4_float", lambda m, x: x ** 4.0, *S_A, domain=(REAL,)),
    A("pow_minus_1", lambda m, x: x ** -1, *S_A, domain=(AwayFromZero(0.5, 2.0),)),
    A("pow_half", lambda m, x: x ** 0.5, *S_A, domain=(POS,)),
    A("clip", lambda m, x: m.clip(x, -0.5, 0.5), ("array", ((2, 3),)),
      domain=(Lattice(0.1, 0.4),)),
    A("clip_one_sided", lambda m, x: m.clip(x, None, 0.5), ("array", ((2, 3),)),
      domain=(Lattice(0.1, 0.4),)),
]
