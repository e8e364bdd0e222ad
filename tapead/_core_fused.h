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
 * the bits).
 *
 * tapead_pow_tangent / tapead_pow_partial_dual: the constant powers x**3 and
 * x**4 under forward mode, each in one pass with numpy's roundings of the
 * unfused rules.  The tangent of x**k is tx * d with d = k x**(k-1) formed as
 * the power rule forms it (d = x*x; d = d*x for k = 4; d = d*k).  The partial
 * k x**(k-1) of a dual x = (x, tx) -- the power's VJP rule under forward over
 * reverse -- is the dual product chain 4.0 * (x*x*x), resp. 3.0 * (x*x):
 * value as above, tangent ((tx*x + tx*x)*x + tx*(x*x)) * 4, resp.
 * (tx*x + tx*x) * 3.
 *
 * tapead_add_product: out += g * d (or out += -(g * d)), the product rounded
 * before the sum: numpy's np.multiply into a temporary, then np.add, in one
 * pass without the temporary (the reverse step of sin(x[a:b]) into x's
 * adjoint).
 *
 * tapead_pieces_first / tapead_pieces_first2 / tapead_pieces_add: an adjoint
 * written from the cotangents that reached it through basic indices (the
 * pieces of _core_pieces.pxi), over one stretch of elements covered by the
 * same pieces: out = 0.0 + v1, out = (0.0 + v1) + v2, out = out + v.  A value
 * v is an array p (kind 0), a product p * q (kind 1) or its negation -(p * q)
 * (kind 2), the product rounded before any sum.  These are the roundings of
 * the unfused path (zeros, then each cotangent added in the order it arrived:
 * np.add(g, 0.0) for the first, np.multiply then np.add for a product) in one
 * pass without the zeros or the temporaries.
 *
 * tapead_tanh_vjp / tapead_tanh_vjp_f: the cotangent of tanh, (1 - a*a) * g
 * from its output a, the three roundings of numpy's three calls in one pass
 * (float64 and float32).
 *
 * tapead_sgd_step / tapead_sgd_step_f: the SGD update p -= lr * g in place,
 * the product rounded before the difference, as numpy's `p -= lr * g` (a
 * temporary lr * g, then an in-place subtraction) in one pass without the
 * temporary (float64 and float32; for float32 numpy rounds the Python float lr
 * to float32 first, and so does the caller).
 *
 * tapead_sum_rows / tapead_sum_rows_f: the column sums of a C-contiguous
 * (rows, n) block, out[j] = ((0.0 + g[0, j]) + g[1, j]) + ...: numpy's
 * np.add.reduce over the leading axes when the kept axes hold n >= 2 elements
 * (its reduction loop then runs over whole rows in order; for n == 1 numpy sums
 * pairwise, and the caller leaves that case to numpy); numpy starts from its
 * identity 0.0 too, so a column of -0.0 sums to +0.0. */
#ifndef TAPEAD_FUSED_H
#define TAPEAD_FUSED_H
#include <math.h>

/* The array kernels below are also built for AVX2 (four doubles a step; no FMA:
 * the "avx2" target does not enable it and -ffp-contract=off forbids
 * contraction), picked at load time on CPUs that have it; elementwise
 * products and sums round the same either way. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define TAPEAD_KERNEL static __attribute__((target_clones("avx2", "default"))) void
#else
#define TAPEAD_KERNEL static inline void
#endif

static inline void tapead_sincos(double x, double *s, double *c)
{
#if defined(__GLIBC__)
    sincos(x, s, c);
#else
    *s = sin(x);
    *c = cos(x);
#endif
}

TAPEAD_KERNEL tapead_mul_tangent(const double *tx, const double *y, const double *ty,
                                      const double *x, double *out, long n)
{
    long i;
    for (i = 0; i < n; i++) {
        double p = tx[i] * y[i];
        double q = ty[i] * x[i];
        out[i] = p + q;
    }
}

TAPEAD_KERNEL tapead_pow_tangent(const double *tx, const double *x, double *out,
                                      long n, int k)
{
    long i;
    double fk = (double)k;
    if (k == 4) {
        for (i = 0; i < n; i++) {
            double d = x[i] * x[i];
            d = d * x[i];
            d = d * fk;
            out[i] = tx[i] * d;
        }
    } else {
        for (i = 0; i < n; i++) {
            double d = x[i] * x[i];
            d = d * fk;
            out[i] = tx[i] * d;
        }
    }
}

TAPEAD_KERNEL tapead_pow_partial_dual(const double *x, const double *tx, double *val,
                                           double *tan, long n, int k)
{
    long i;
    double fk = (double)k;
    if (k == 4) {
        for (i = 0; i < n; i++) {
            double x2 = x[i] * x[i];
            double p = tx[i] * x[i];
            double t2 = p + p;
            double x3 = x2 * x[i];
            double a = t2 * x[i];
            double b = tx[i] * x2;
            val[i] = x3 * fk;
            tan[i] = (a + b) * fk;
        }
    } else {
        for (i = 0; i < n; i++) {
            double x2 = x[i] * x[i];
            double p = tx[i] * x[i];
            val[i] = x2 * fk;
            tan[i] = (p + p) * fk;
        }
    }
}

TAPEAD_KERNEL tapead_add_product(double *out, const double *g, const double *d,
                                      long n, int negate)
{
    long i;
    if (negate) {
        for (i = 0; i < n; i++) {
            double p = g[i] * d[i];
            out[i] = out[i] + (-p);
        }
    } else {
        for (i = 0; i < n; i++) {
            double p = g[i] * d[i];
            out[i] = out[i] + p;
        }
    }
}

/* One value of a piece: p[i] (kind 0), p[i] * q[i] (1), -(p[i] * q[i]) (2);
 * `kind` is a literal at every use, so each loop below is specialised. */
#define TAPEAD_PIECE(kind, p, q, i) \
    ((kind) == 0 ? (p)[i] : (kind) == 1 ? (p)[i] * (q)[i] : -((p)[i] * (q)[i]))

#define TAPEAD_FIRST_LOOP(k1) \
    for (i = 0; i < n; i++) out[i] = 0.0 + TAPEAD_PIECE(k1, p1, q1, i)

TAPEAD_KERNEL tapead_pieces_first(double *out, long n, int k1, const double *p1,
                                       const double *q1)
{
    long i;
    switch (k1) {
    case 0: TAPEAD_FIRST_LOOP(0); break;
    case 1: TAPEAD_FIRST_LOOP(1); break;
    default: TAPEAD_FIRST_LOOP(2); break;
    }
}

#define TAPEAD_FIRST2_LOOP(k1, k2) \
    for (i = 0; i < n; i++) { \
        double a = 0.0 + TAPEAD_PIECE(k1, p1, q1, i); \
        double b = TAPEAD_PIECE(k2, p2, q2, i); \
        out[i] = a + b; \
    }

TAPEAD_KERNEL tapead_pieces_first2(double *out, long n, int k1, const double *p1,
                                        const double *q1, int k2, const double *p2,
                                        const double *q2)
{
    long i;
    switch (3 * k1 + k2) {
    case 0: TAPEAD_FIRST2_LOOP(0, 0); break;
    case 1: TAPEAD_FIRST2_LOOP(0, 1); break;
    case 2: TAPEAD_FIRST2_LOOP(0, 2); break;
    case 3: TAPEAD_FIRST2_LOOP(1, 0); break;
    case 4: TAPEAD_FIRST2_LOOP(1, 1); break;
    case 5: TAPEAD_FIRST2_LOOP(1, 2); break;
    case 6: TAPEAD_FIRST2_LOOP(2, 0); break;
    case 7: TAPEAD_FIRST2_LOOP(2, 1); break;
    default: TAPEAD_FIRST2_LOOP(2, 2); break;
    }
}

#define TAPEAD_ADD_LOOP(k) \
    for (i = 0; i < n; i++) { \
        double b = TAPEAD_PIECE(k, p, q, i); \
        out[i] = out[i] + b; \
    }

TAPEAD_KERNEL tapead_pieces_add(double *out, long n, int k, const double *p,
                                     const double *q)
{
    long i;
    switch (k) {
    case 0: TAPEAD_ADD_LOOP(0); break;
    case 1: TAPEAD_ADD_LOOP(1); break;
    default: TAPEAD_ADD_LOOP(2); break;
    }
}

TAPEAD_KERNEL tapead_tanh_vjp(const double *a, const double *g, double *out, long n)
{
    long i;
    for (i = 0; i < n; i++) {
        double d = a[i] * a[i];
        d = 1.0 - d;
        out[i] = d * g[i];
    }
}

TAPEAD_KERNEL tapead_tanh_vjp_f(const float *a, const float *g, float *out, long n)
{
    long i;
    for (i = 0; i < n; i++) {
        float d = a[i] * a[i];
        d = 1.0f - d;
        out[i] = d * g[i];
    }
}

TAPEAD_KERNEL tapead_sgd_step(double *p, const double *g, double lr, long n)
{
    long i;
    for (i = 0; i < n; i++) {
        double t = lr * g[i];
        p[i] = p[i] - t;
    }
}

TAPEAD_KERNEL tapead_sgd_step_f(float *p, const float *g, float lr, long n)
{
    long i;
    for (i = 0; i < n; i++) {
        float t = lr * g[i];
        p[i] = p[i] - t;
    }
}

TAPEAD_KERNEL tapead_sum_rows(const double *g, double *out, long rows, long n)
{
    long i, j;
    for (j = 0; j < n; j++)
        out[j] = 0.0;
    for (i = 0; i < rows; i++) {
        const double *r = g + i * n;
        for (j = 0; j < n; j++)
            out[j] = out[j] + r[j];
    }
}

TAPEAD_KERNEL tapead_sum_rows_f(const float *g, float *out, long rows, long n)
{
    long i, j;
    for (j = 0; j < n; j++)
        out[j] = 0.0f;
    for (i = 0; i < rows; i++) {
        const float *r = g + i * n;
        for (j = 0; j < n; j++)
            out[j] = out[j] + r[j];
    }
}

#endif
