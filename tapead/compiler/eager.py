"""Compiled loop bodies for scans run outside ``ta.jit``.

An eager ``ta.scan`` (and a ``fori_loop`` that is one) records its body on a
new tape at every call, so there is no recording to compile once.  Instead
bodies are keyed by their structure: the second scan of a body in a process
compiles it in a background thread (``tapead.compiler.bodies``), and the
scans after that run the compiled code.  Short scans, and processes without
a C compiler, stay on the interpreter, which gives the same bits.
"""
from __future__ import annotations

import threading
from typing import Dict

from tapead.compiler import native
from tapead.compiler.bodies import PARTS, PRELUDE, _Body, _lock, library

__all__ = ["for_eager", "compiled", "EAGER_AFTER", "EAGER_MIN_WORK"]


EAGER_AFTER = 2            # eager scans of one body before it is compiled (in the background)
EAGER_MIN_WORK = 4096      # steps x body nodes below which an eager scan stays interpreted

_eager: Dict[tuple, object] = {}   # body key -> times seen, or (library, addresses, aux width)
_eager_native: list = []                # [whether native code is on here], once known


def _find_native():
    _eager_native.append(native.available())


def _eager_on() -> bool:
    """Whether eager scans may use compiled bodies: native code is on and was
    found here (looked for once, in the background: a first call does not
    wait for the compiler probe)."""
    if not native.enabled():
        return False
    if not _eager_native:
        with _lock:
            if not _eager_native and not any(t.name == "tapead-find-native"
                                             for t in threading.enumerate()):
                threading.Thread(target=_find_native, daemon=True,
                                 name="tapead-find-native").start()
        return False
    return _eager_native[0]


def _key(spec) -> tuple:
    op, a, b, consts = spec[:4]
    return (op.tobytes(), a.tobytes(), b.tobytes(), consts.tobytes()) + tuple(
        tuple(v) if isinstance(v, (list, tuple)) else v for v in spec[4:])


def for_eager(loop, steps: int) -> bool:
    """Point a scan run outside ``ta.jit`` at compiled code for its body when
    this process has compiled that body; the ``EAGER_AFTER``-th scan of a body
    compiles it in a background thread (so a training loop that calls the same
    gradient again runs compiled from then on; the first calls and short
    scans stay on the interpreter, which gives the same bits).  Returns
    whether ``loop`` now runs compiled code."""
    found = compiled(loop.body_spec(), steps)
    if found is None:
        return False
    lib, addresses, width = found
    loop.set_native(lib, *addresses[:5], width)
    return True


def compiled(spec, steps: int, min_work: int = EAGER_MIN_WORK, small: bool = False,
             make=None):
    """``(library, addresses, aux_width)`` of the compiled body ``spec`` (a
    ``ScalarLoop.body_spec``-style tuple; ``addresses`` in the order of
    ``bodies.PARTS``) when this process has compiled it, else None.  Counts
    the call: the ``EAGER_AFTER``-th run of a body over ``steps`` steps
    (``steps`` x its nodes at least ``EAGER_MIN_WORK``) compiles it in a
    background thread (``min_work`` in place of ``EAGER_MIN_WORK`` when given).
    ``small``: a run below ``min_work`` still gets the compiled body when there
    is one (it only does not count towards compiling it).  ``make(spec)``: the
    code to compile instead of the body's functions, ``(C source after
    bodies.PRELUDE, function names)`` or None (nothing to compile); then
    ``(library, addresses, 0)``."""
    if not _eager_on():
        return None
    short = steps * len(spec[0]) < min_work
    if short and not small:
        return None
    key = _key(spec) + ((make.__module__, make.__qualname__) if make is not None else ())
    with _lock:
        seen = _eager.get(key, 0)
        if type(seen) is int:
            if short:
                return None
            _eager[key] = seen + 1
            if seen + 1 == EAGER_AFTER:
                threading.Thread(target=_compile_eager, args=(key, spec, make), daemon=True,
                                 name="tapead-compile-loop").start()
            return None
    return None if seen[0] is None else seen


def _compile_eager(key, spec, make=None):
    done = (None, (), 0)
    if make is not None:
        try:
            made = make(spec)
            if made is not None:
                lib = library(PRELUDE + made[0], 0, (), names=made[1])
                done = (lib, tuple(lib.addresses), 0)
        except (OSError, RuntimeError, ValueError):
            pass
        with _lock:
            _eager[key] = done
        return
    body = _Body(spec)
    try:
        if not body.missing():
            lib = library(PRELUDE + body.source("tapead_body_0"), 1,
                          ("step",) if body.step_only else PARTS)
            done = (lib, tuple(lib.addresses), body.aux_width)
    except (OSError, RuntimeError, ValueError):
        pass                    # the interpreter stays: same numbers
    with _lock:
        _eager[key] = done
