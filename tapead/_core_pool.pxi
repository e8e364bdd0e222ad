# The memory pool (included by _core.pyx): a numpy memory handler (NEP 49,
# _core_pool.h) that keeps freed large blocks for reuse, installed while a
# tapead transform runs (``with pooled():`` in the transforms' entry
# points), so the intermediates of one call reuse the pages of the last one
# instead of faulting in fresh ones.  Arrays allocated meanwhile (results
# included) are plain numpy arrays; their memory returns to the pool when
# numpy frees them.  ``TAPEAD_POOL_MB`` bounds the memory kept (default 256;
# 0 turns the pool off).

cdef extern from "_core_pool.h":
    object tapead_pool_capsule()
    size_t tapead_pool_clear()
    size_t tapead_pool_limit
    size_t tapead_pool_bytes
    size_t tapead_pool_count
    unsigned long long tapead_pool_hits
    unsigned long long tapead_pool_misses
    object PyDataMem_SetHandler(object handler)


def _pool_limit_from_env():
    import os
    text = os.environ.get("TAPEAD_POOL_MB", "256")
    try:
        mb = float(text)
    except ValueError:
        raise ValueError(f"TAPEAD_POOL_MB={text!r}: give the memory the pool may keep in "
                         "megabytes (a number; 0 turns the pool off)") from None
    if mb < 0:
        raise ValueError(f"TAPEAD_POOL_MB={text!r}: it must be 0 (off) or positive")
    return int(mb * (1 << 20))


tapead_pool_limit = _pool_limit_from_env()
cdef object _POOL = tapead_pool_capsule() if tapead_pool_limit > 0 else None


@cython.final
cdef class _PoolScope:
    """``with pooled():`` numpy allocates through the pool inside the block."""
    cdef object old

    def __enter__(self):
        if _POOL is not None:
            self.old = PyDataMem_SetHandler(_POOL)
        return self

    def __exit__(self, *exc):
        if self.old is not None:
            PyDataMem_SetHandler(self.old)
            self.old = None
        return False


def pooled():
    """A context in which numpy allocates through tapead's memory pool."""
    return _PoolScope()


def pool_info():
    """The pool's state: bytes and blocks kept, hits and misses since import,
    and the byte limit (``TAPEAD_POOL_MB``)."""
    return {"bytes": tapead_pool_bytes, "blocks": tapead_pool_count,
            "hits": tapead_pool_hits, "misses": tapead_pool_misses,
            "limit": tapead_pool_limit, "enabled": _POOL is not None}


def pool_clear():
    """Give the blocks the pool keeps back to the system; returns the bytes."""
    return tapead_pool_clear()
