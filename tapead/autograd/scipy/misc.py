"""``autograd.scipy.misc``: ``logsumexp`` (scipy moved it to ``scipy.special``)."""
from tapead.scipy.special import logsumexp  # noqa: F401

__all__ = ["logsumexp"]
