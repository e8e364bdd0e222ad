/* A numpy memory handler (NEP 49) that keeps freed large blocks for reuse
 * (_core_pool.pxi installs it while a tapead transform runs).
 *
 * Why: a gradient keeps every intermediate of the function alive until its
 * reverse sweep ends, so each call allocates and frees many large arrays.
 * glibc's malloc serves blocks above its mmap threshold with fresh mappings,
 * and returns the top of the heap to the system when more than its trim
 * threshold is free; either way the next call touches fresh pages, and the
 * page faults cost more than the arithmetic (an 8 MB temporary: ~1-2 ms of
 * faults for ~0.5 ms of multiplication).  Blocks of at least
 * TAPEAD_POOL_MIN bytes freed through this handler are kept (up to a byte
 * limit) and handed out again for a request of the same rounded size.
 *
 * Every block has a 16-byte header before the data (its capacity and a
 * marker), so a free never relies on the size numpy passes; the data stays
 * 16-byte aligned as malloc's.  The memory itself comes from numpy's default
 * allocator (its cache of small blocks serves the many tiny arrays of
 * small-vector code as before).  The pool takes a mutex: numpy may allocate
 * or free from any thread. */
#ifndef TAPEAD_POOL_H
#define TAPEAD_POOL_H
#include <Python.h>
#include <numpy/arrayobject.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define TAPEAD_POOL_MIN (64 * 1024)
#define TAPEAD_POOL_SLOTS 128
#define TAPEAD_POOL_MAGIC 0x7461706561646d6dULL    /* "tapeadmm" */

typedef struct { size_t capacity; unsigned long long magic; } tapead_block_header;

static pthread_mutex_t tapead_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static void *tapead_pool_blocks[TAPEAD_POOL_SLOTS];   /* headers of kept blocks */
static size_t tapead_pool_count = 0;
static size_t tapead_pool_bytes = 0;
static size_t tapead_pool_limit = (size_t)256 << 20;
static unsigned long long tapead_pool_hits = 0, tapead_pool_misses = 0;
static PyDataMemAllocator *tapead_base = NULL;      /* numpy's default allocator */
#define TAPEAD_HDR sizeof(tapead_block_header)

static inline void *tapead_base_malloc(size_t n)
{
    return tapead_base->malloc(tapead_base->ctx, n);
}

static inline void tapead_base_free(tapead_block_header *h)
{
    tapead_base->free(tapead_base->ctx, h, h->capacity + TAPEAD_HDR);
}

static inline size_t tapead_pool_class(size_t size)
{
    return (size + 4095) & ~(size_t)4095;
}

/* A kept block of capacity exactly `capacity`, removed from the pool, or NULL. */
static void *tapead_pool_take(size_t capacity)
{
    size_t i;
    void *found = NULL;
    pthread_mutex_lock(&tapead_pool_lock);
    for (i = tapead_pool_count; i-- > 0;) {        /* the most recently kept first */
        tapead_block_header *h = (tapead_block_header *)tapead_pool_blocks[i];
        if (h->capacity == capacity) {
            found = h;
            tapead_pool_blocks[i] = tapead_pool_blocks[--tapead_pool_count];
            tapead_pool_bytes -= capacity;
            break;
        }
    }
    if (found) tapead_pool_hits++; else tapead_pool_misses++;
    pthread_mutex_unlock(&tapead_pool_lock);
    return found;
}

static void *tapead_pool_new(size_t size, int zero)
{
    size_t capacity = size < TAPEAD_POOL_MIN ? size : tapead_pool_class(size);
    tapead_block_header *h = NULL;
    if (capacity >= TAPEAD_POOL_MIN) {
        h = (tapead_block_header *)tapead_pool_take(capacity);
        if (h && zero)
            memset((char *)h + sizeof(tapead_block_header), 0, capacity);
    }
    if (!h) {
        h = (tapead_block_header *)(zero ? tapead_base->calloc(tapead_base->ctx, 1,
                                                               TAPEAD_HDR + capacity)
                                         : tapead_base_malloc(TAPEAD_HDR + capacity));
        if (!h) return NULL;
        h->capacity = capacity;
        h->magic = TAPEAD_POOL_MAGIC;
    }
    return (char *)h + sizeof(tapead_block_header);
}

static void *tapead_pool_malloc(void *ctx, size_t size)
{
    (void)ctx;
    return tapead_pool_new(size, 0);
}

static void *tapead_pool_calloc(void *ctx, size_t nelem, size_t elsize)
{
    (void)ctx;
    if (elsize && nelem > ((size_t)-1 - 4096 - sizeof(tapead_block_header)) / elsize)
        return NULL;
    return tapead_pool_new(nelem * elsize, 1);
}

static tapead_block_header *tapead_pool_header(void *ptr)
{
    tapead_block_header *h = (tapead_block_header *)((char *)ptr - sizeof(tapead_block_header));
    if (h->magic != TAPEAD_POOL_MAGIC) abort();    /* not ours: never guess */
    return h;
}

static void tapead_pool_free(void *ctx, void *ptr, size_t size)
{
    tapead_block_header *h;
    (void)ctx; (void)size;
    if (!ptr) return;
    h = tapead_pool_header(ptr);
    if (h->capacity >= TAPEAD_POOL_MIN) {
        pthread_mutex_lock(&tapead_pool_lock);
        if (tapead_pool_count < TAPEAD_POOL_SLOTS
                && tapead_pool_bytes + h->capacity <= tapead_pool_limit) {
            tapead_pool_blocks[tapead_pool_count++] = h;
            tapead_pool_bytes += h->capacity;
            h = NULL;
        }
        pthread_mutex_unlock(&tapead_pool_lock);
    }
    if (h) tapead_base_free(h);
}

static void *tapead_pool_realloc(void *ctx, void *ptr, size_t new_size)
{
    tapead_block_header *h, *moved;
    size_t capacity;
    if (!ptr) return tapead_pool_malloc(ctx, new_size);
    h = tapead_pool_header(ptr);
    capacity = new_size < TAPEAD_POOL_MIN ? new_size : tapead_pool_class(new_size);
    moved = (tapead_block_header *)tapead_base->realloc(tapead_base->ctx, h,
                                                        TAPEAD_HDR + capacity);
    if (!moved) return NULL;
    moved->capacity = capacity;
    return (char *)moved + sizeof(tapead_block_header);
}

/* Free every kept block; returns the bytes released. */
static size_t tapead_pool_clear(void)
{
    size_t i, released;
    pthread_mutex_lock(&tapead_pool_lock);
    for (i = 0; i < tapead_pool_count; i++)
        tapead_base_free((tapead_block_header *)tapead_pool_blocks[i]);
    released = tapead_pool_bytes;
    tapead_pool_count = 0;
    tapead_pool_bytes = 0;
    pthread_mutex_unlock(&tapead_pool_lock);
    return released;
}

static PyDataMem_Handler tapead_pool_handler = {
    "tapead_pool",
    1,
    {
        NULL,
        tapead_pool_malloc,
        tapead_pool_calloc,
        tapead_pool_realloc,
        tapead_pool_free
    }
};

static PyObject *tapead_pool_capsule(void)
{
    PyDataMem_Handler *base = (PyDataMem_Handler *)PyCapsule_GetPointer(
        PyDataMem_DefaultHandler, "mem_handler");
    if (!base) return NULL;
    tapead_base = &base->allocator;
    return PyCapsule_New(&tapead_pool_handler, "mem_handler", NULL);
}
#endif
