# A cache of large array buffers (included by _core.pyx): numpy's data
# allocator, in this thread's context, keeps freed buffers of 128 KiB or more
# (at most 32 of them, 256 MiB in all) and hands them out again for the next
# array of the same size, instead of glibc's mmap and munmap of each one (a
# page fault per 4 KiB on first touch: about 1 ms for an array of 1e6 floats,
# and a gradient at that size makes five of them).  See _core_buffers.h.
# ``TAPEAD_BUFFER_CACHE=0`` in the environment leaves numpy's allocator alone.

from cpython.pycapsule cimport PyCapsule_New, PyCapsule_GetPointer

cdef extern from "_core_buffers.h" nogil:
    void *tapead_buf_malloc(void *ctx, size_t size)
    void *tapead_buf_calloc(void *ctx, size_t nelem, size_t elsize)
    void *tapead_buf_realloc(void *ctx, void *ptr, size_t new_size)
    void tapead_buf_free(void *ctx, void *ptr, size_t size)
    size_t tapead_cache_clear()
    void tapead_set_fallback(void *ctx, void *(*m)(void *, size_t) noexcept nogil,
                             void *(*c)(void *, size_t, size_t) noexcept nogil,
                             void *(*r)(void *, void *, size_t) noexcept nogil,
                             void (*f)(void *, void *, size_t) noexcept nogil)
    unsigned long tapead_cache_hits, tapead_cache_misses
    size_t tapead_cache_bytes
    int tapead_cache_count

cdef extern from "numpy/ndarraytypes.h":
    ctypedef struct PyDataMemAllocator:
        void *ctx
        void *(*malloc)(void *ctx, size_t size) noexcept nogil
        void *(*calloc)(void *ctx, size_t nelem, size_t elsize) noexcept nogil
        void *(*realloc)(void *ctx, void *ptr, size_t new_size) noexcept nogil
        void (*free)(void *ctx, void *ptr, size_t size) noexcept nogil
    ctypedef struct PyDataMem_Handler:
        char name[127]
        unsigned char version
        PyDataMemAllocator allocator

cdef extern from "numpy/arrayobject.h":
    object PyDataMem_SetHandler(object handler)

cdef PyDataMem_Handler _buffer_handler
cdef object _buffer_capsule = None


cdef object _make_buffer_handler():
    cdef bytes name = b"tapead_buffer_cache"
    memset(_buffer_handler.name, 0, 127)
    memcpy(_buffer_handler.name, <char *>name, len(name))
    _buffer_handler.version = 1
    _buffer_handler.allocator.ctx = NULL
    _buffer_handler.allocator.malloc = tapead_buf_malloc
    _buffer_handler.allocator.calloc = tapead_buf_calloc
    _buffer_handler.allocator.realloc = tapead_buf_realloc
    _buffer_handler.allocator.free = tapead_buf_free
    return PyCapsule_New(<void *>&_buffer_handler, "mem_handler", NULL)


def use_buffer_cache():
    """Make numpy allocate array data through tapead's buffer cache in the
    calling thread's context (``_core`` does it at import for the importing
    thread unless ``TAPEAD_BUFFER_CACHE=0``); returns numpy's handler that
    was in use, a capsule for ``np.core.multiarray`` internals."""
    global _buffer_capsule
    cdef PyDataMem_Handler *old
    first = _buffer_capsule is None
    if first:
        _buffer_capsule = _make_buffer_handler()
    previous = PyDataMem_SetHandler(_buffer_capsule)
    if first:
        # small blocks and the frees the cache does not keep: numpy's handler
        old = <PyDataMem_Handler *>PyCapsule_GetPointer(previous, "mem_handler")
        tapead_set_fallback(old.allocator.ctx, old.allocator.malloc, old.allocator.calloc,
                            old.allocator.realloc, old.allocator.free)
    return previous


def restore_allocator(handler):
    """Put back a handler returned by ``use_buffer_cache`` (arrays already
    allocated keep the allocator that made them)."""
    return PyDataMem_SetHandler(handler)


def release_cached_buffers():
    """Free the buffers the cache holds; returns the bytes released."""
    return tapead_cache_clear()


def buffer_cache_info():
    """``{"hits", "misses", "blocks", "bytes"}`` of the buffer cache."""
    return {"hits": tapead_cache_hits, "misses": tapead_cache_misses,
            "blocks": tapead_cache_count, "bytes": tapead_cache_bytes}


import os as _os
if _os.environ.get("TAPEAD_BUFFER_CACHE", "1") != "0":
    use_buffer_cache()
