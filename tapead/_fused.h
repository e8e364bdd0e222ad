/* One-pass sine and cosine for tapead's fused kernels (_kernels.pxi).
 *
 * glibc's sincos(x) returns exactly sin(x) and cos(x) (one range reduction
 * for both); elsewhere the pair is libm's sin and cos called per element, so
 * the values are libm's either way.  _kernels.pxi checks them against
 * numpy's np.sin / np.cos once at import and uses numpy when they differ. */
#ifndef TAPEAD_FUSED_H
#define TAPEAD_FUSED_H
#include <math.h>

static inline void tapead_sincos(double x, double *s, double *c)
{
#if defined(__GLIBC__)
    sincos(x, s, c);
#else
    *s = sin(x);
    *c = cos(x);
#endif
}

#endif
