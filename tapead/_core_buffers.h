/* A small cache of large array buffers for numpy's data allocator
 * (_core_buffers.pxi installs it with PyDataMem_SetHandler).
 *
 * glibc serves every allocation of more than a few hundred kilobytes with a
 * fresh mmap and returns it with munmap on free, so each large temporary
 * costs a page fault per 4 KiB page on first touch (about 1 ms for 8 MB):
 * a gradient at n = 1e6 makes five such arrays per call.  Freed buffers of
 * at least TAPEAD_CACHE_MIN bytes are kept here instead (at most
 * TAPEAD_CACHE_SLOTS of them, TAPEAD_CACHE_BYTES in all) and handed out again
 * for a request of the same size, or up to 1/16 smaller.  Smaller requests,
 * every realloc and the frees the cache does not keep go to the handler that
 * was in use before (numpy's default, with its own cache of tiny blocks); all
 * of them end in libc's malloc, so any buffer may be freed or resized by
 * either path.  ``calloc`` of a cached buffer clears it with memset.  A mutex
 * guards the table (numpy may free array data from any thread). */
#ifndef TAPEAD_BUFFERS_H
#define TAPEAD_BUFFERS_H
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#define TAPEAD_CACHE_SLOTS 32
#define TAPEAD_CACHE_MIN (1u << 17)                 /* 128 KiB: glibc mmaps from here */
#define TAPEAD_CACHE_BYTES ((size_t)256 << 20)      /* 256 MiB */

typedef struct { void *ptr; size_t size; } tapead_block;

static tapead_block tapead_cache[TAPEAD_CACHE_SLOTS];
static size_t tapead_cache_bytes = 0;
static int tapead_cache_count = 0;
static pthread_mutex_t tapead_cache_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long tapead_cache_hits = 0, tapead_cache_misses = 0;

/* the handler in use before: small blocks, realloc, frees not kept */
static void *tapead_fb_ctx = NULL;
static void *(*tapead_fb_malloc)(void *, size_t) = NULL;
static void *(*tapead_fb_calloc)(void *, size_t, size_t) = NULL;
static void *(*tapead_fb_realloc)(void *, void *, size_t) = NULL;
static void (*tapead_fb_free)(void *, void *, size_t) = NULL;

static void tapead_set_fallback(void *ctx, void *(*m)(void *, size_t),
                                void *(*c)(void *, size_t, size_t),
                                void *(*r)(void *, void *, size_t),
                                void (*f)(void *, void *, size_t))
{
    tapead_fb_ctx = ctx;
    tapead_fb_malloc = m;
    tapead_fb_calloc = c;
    tapead_fb_realloc = r;
    tapead_fb_free = f;
}

/* a cached block of size in [size, size + size/16], removed from the cache */
static void *tapead_cache_take(size_t size)
{
    void *p = NULL;
    int i, best = -1;
    if (size < TAPEAD_CACHE_MIN)
        return NULL;
    pthread_mutex_lock(&tapead_cache_lock);
    for (i = 0; i < tapead_cache_count; i++) {
        size_t s = tapead_cache[i].size;
        if (s >= size && s - size <= size / 16 &&
                (best < 0 || s < tapead_cache[best].size))
            best = i;
    }
    if (best >= 0) {
        p = tapead_cache[best].ptr;
        tapead_cache_bytes -= tapead_cache[best].size;
        tapead_cache[best] = tapead_cache[--tapead_cache_count];
        tapead_cache_hits++;
    } else {
        tapead_cache_misses++;
    }
    pthread_mutex_unlock(&tapead_cache_lock);
    return p;
}

static void *tapead_buf_malloc(void *ctx, size_t size)
{
    void *p = tapead_cache_take(size);
    (void)ctx;
    if (p)
        return p;
    return tapead_fb_malloc ? tapead_fb_malloc(tapead_fb_ctx, size) : malloc(size);
}

static void *tapead_buf_calloc(void *ctx, size_t nelem, size_t elsize)
{
    void *p;
    (void)ctx;
    if (elsize && nelem > (size_t)-1 / elsize)
        return NULL;
    p = tapead_cache_take(nelem * elsize);
    if (p == NULL)
        return tapead_fb_calloc ? tapead_fb_calloc(tapead_fb_ctx, nelem, elsize)
                                : calloc(nelem, elsize);
    memset(p, 0, nelem * elsize);
    return p;
}

static void *tapead_buf_realloc(void *ctx, void *ptr, size_t new_size)
{
    (void)ctx;
    return tapead_fb_realloc ? tapead_fb_realloc(tapead_fb_ctx, ptr, new_size)
                             : realloc(ptr, new_size);
}

/* ``size`` is the size numpy asked for: the block holds at least that much */
static void tapead_buf_free(void *ctx, void *ptr, size_t size)
{
    (void)ctx;
    if (ptr == NULL)
        return;
    if (size >= TAPEAD_CACHE_MIN) {
        pthread_mutex_lock(&tapead_cache_lock);
        if (tapead_cache_count < TAPEAD_CACHE_SLOTS &&
                tapead_cache_bytes + size <= TAPEAD_CACHE_BYTES) {
            tapead_cache[tapead_cache_count].ptr = ptr;
            tapead_cache[tapead_cache_count].size = size;
            tapead_cache_count++;
            tapead_cache_bytes += size;
            ptr = NULL;
        }
        pthread_mutex_unlock(&tapead_cache_lock);
        if (ptr == NULL)
            return;
    }
    if (tapead_fb_free)
        tapead_fb_free(tapead_fb_ctx, ptr, size);
    else
        free(ptr);
}

/* free every cached block; returns the bytes released */
static size_t tapead_cache_clear(void)
{
    size_t released;
    int i;
    pthread_mutex_lock(&tapead_cache_lock);
    for (i = 0; i < tapead_cache_count; i++)
        free(tapead_cache[i].ptr);
    released = tapead_cache_bytes;
    tapead_cache_count = 0;
    tapead_cache_bytes = 0;
    pthread_mutex_unlock(&tapead_cache_lock);
    return released;
}

#endif
