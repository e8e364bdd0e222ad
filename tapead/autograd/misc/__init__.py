"""autograd's ``misc``: ``flatten``, the optimizers, ``fixed_point``, ``const_graph``."""
from tapead.autograd.misc.flatten import flatten  # noqa: F401
from tapead.autograd.misc.tracers import const_graph  # noqa: F401

__all__ = ["flatten", "const_graph"]
