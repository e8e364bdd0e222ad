/* Elementwise kernels for tapead's fused rules (_core_fused.pxi).
 *
 * tapead_sincos: glibc's sincos(x) returns exactly sin(x) and cos(x) (one
 * range reduction for both); elsewhere the pair is libm's sin and cos called
 * per element, so the values are libm's either way.  _core_fused.pxi checks them
 * against numpy's np.sin / np.cos once at import and uses numpy when they
 * differ.
 *
 * tapead_mul_tangent: the tangent of x * y for dual numbers, tx * y + ty * x,
 * the two products rounded and then added, as numpy computes them in three
 * passes (the build sets -ffp-contract=off, so no fused multiply-add changes
 * the bits). */
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

static inline void tapead_mul_tangent(const double *tx, const double *y, const double *ty,
                                      const double *x, double *out, long n)
{
    long i;
    for (i = 0; i < n; i++) {
        double p = tx[i] * y[i];
        double q = ty[i] * x[i];
        out[i] = p + q;
    }
}

#endif
