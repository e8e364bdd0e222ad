"""``autograd.scipy.special``: scipy.special's names, the differentiable ones
tapead's (``tapead.scipy.special``); the others are scipy's own, which raise
a ``NonDifferentiableError`` naming the function on traced values."""
import scipy.special as _sps

globals().update({_n: getattr(_sps, _n) for _n in dir(_sps) if not _n.startswith("_")})

from tapead.scipy.special import *  # noqa: F401,F403,E402
from tapead.scipy.special import jv as jn  # noqa: F401,E402  (scipy: jn is jv of an integer order)

from tapead import _core  # noqa: E402
from tapead.scipy import special as _tsps  # noqa: E402
from tapead.errors import MissingRuleError  # noqa: E402


def _plain_only(name):
    scipy_fn = getattr(_sps, name)

    def fn(*args, **kwargs):
        if any(isinstance(a, _core.Box) for a in args):
            raise MissingRuleError(f"scipy.special.{name} has no derivative in tapead yet; "
                                   "write it with functions of tapead.scipy.special")
        return scipy_fn(*args, **kwargs)
    fn.__name__, fn.__doc__ = name, f"scipy.special.{name} on plain values (no derivative yet)."
    return fn


# scipy functions written in Python (not ufuncs): on traced values they would fail
# deep inside scipy, so they say what is missing instead
for _n in ("multigammaln",):
    if not hasattr(_tsps, _n):
        globals()[_n] = _plain_only(_n)
