"""Op-spec rows of the elementwise functions built from other primitives:
fmax/fmin and clip (from maximum/minimum).

Domains keep every point smooth: fmax/fmin draw their arguments from
disjoint lattices (no ties), clip's points stay away from its bounds.
"""
from __future__ import annotations

from opspecs import Lattice
from opspecs import _array_op as A

B2 = (("array", ((2, 3), (2, 3))), ("bcast_row", ((3,), (2, 3))))

ARRAY_OPS = [
    A("fmax", lambda m, x, y: m.fmax(x, y), *B2,
      domain=(Lattice(0.0, 0.4), Lattice(0.6, 1.0))),
    A("fmin", lambda m, x, y: m.fmin(x, y), *B2,
      domain=(Lattice(0.0, 0.4), Lattice(0.6, 1.0))),
    A("clip", lambda m, x: m.clip(x, -0.5, 0.5), ("array", ((2, 3),)),
      domain=(Lattice(0.1, 0.4),)),
    A("clip_one_sided", lambda m, x: m.clip(x, None, 0.5), ("array", ((2, 3),)),
      domain=(Lattice(0.1, 0.4),)),
]
