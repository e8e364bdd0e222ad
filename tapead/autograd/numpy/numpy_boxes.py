"""autograd's ``numpy_boxes``: ``ArrayBox`` is tapead's traced value (see
``tapead.autograd.tracer.Box``)."""
from tapead.autograd.tracer import Box

ArrayBox = Box

__all__ = ["ArrayBox"]
