/*
 * Tiled matrix product C = A * B (row-major doubles; C is overwritten, not accumulated).
 *
 *   void gemm(int m, int n, int k, const double *a, const double *b, double *c)
 *
 * a: m x k, b: k x n, c: m x n, all row-major with their natural leading dimensions.
 *
 * Compile-time design (-D NAME=value):
 *   TILE_M, TILE_N, TILE_K  tile sizes (C tiles are spread over the OpenMP threads);
 *   UNROLL                  unroll factor of the innermost loop (#pragma GCC unroll);
 *   LOOP_ORDER              order of the loops inside a tile: ijk (dot products), ikj or kij
 *                           (both stream rows of B and C).
 * Run-time design: threads, via omp_set_num_threads (the executor's glue).
 */
#include <stddef.h>

#ifndef TILE_M
#define TILE_M 32
#endif
#ifndef TILE_N
#define TILE_N 64
#endif
#ifndef TILE_K
#define TILE_K 64
#endif
#ifndef UNROLL
#define UNROLL 1
#endif

/* LOOP_ORDER is passed as a token; these give each token a number for #if. */
#define ijk 1
#define ikj 2
#define kij 3
#ifndef LOOP_ORDER
#define LOOP_ORDER ikj
#endif
#if LOOP_ORDER != ijk && LOOP_ORDER != ikj && LOOP_ORDER != kij
#error "LOOP_ORDER must be ijk, ikj or kij"
#endif

#define PRAGMA_(x) _Pragma(#x)
#define UNROLL_LOOP_(n) PRAGMA_(GCC unroll n)
#define UNROLL_LOOP UNROLL_LOOP_(UNROLL)

static int imin(int x, int y) { return x < y ? x : y; }

void gemm(int m, int n, int k, const double *a, const double *b, double *c)
{
    int tm = (m + TILE_M - 1) / TILE_M;
    int tn = (n + TILE_N - 1) / TILE_N;
#pragma omp parallel for collapse(2) schedule(static)
    for (int bi = 0; bi < tm; bi++) {
        for (int bj = 0; bj < tn; bj++) {
            int i0 = bi * TILE_M, i1 = imin(i0 + TILE_M, m);
            int j0 = bj * TILE_N, j1 = imin(j0 + TILE_N, n);
            for (int i = i0; i < i1; i++)
                for (int j = j0; j < j1; j++) c[(size_t)i * n + j] = 0.0;
            for (int k0 = 0; k0 < k; k0 += TILE_K) {
                int k1 = imin(k0 + TILE_K, k);
#if LOOP_ORDER == ijk
                for (int i = i0; i < i1; i++) {
                    for (int j = j0; j < j1; j++) {
                        double s = c[(size_t)i * n + j];
                        UNROLL_LOOP
                        for (int p = k0; p < k1; p++) s += a[(size_t)i * k + p] * b[(size_t)p * n + j];
                        c[(size_t)i * n + j] = s;
                    }
                }
#elif LOOP_ORDER == ikj
                for (int i = i0; i < i1; i++) {
                    double *ci = c + (size_t)i * n;
                    for (int p = k0; p < k1; p++) {
                        double aip = a[(size_t)i * k + p];
                        const double *bp = b + (size_t)p * n;
                        UNROLL_LOOP
                        for (int j = j0; j < j1; j++) ci[j] += aip * bp[j];
                    }
                }
#else /* kij */
                for (int p = k0; p < k1; p++) {
                    const double *bp = b + (size_t)p * n;
                    for (int i = i0; i < i1; i++) {
                        double aip = a[(size_t)i * k + p];
                        double *ci = c + (size_t)i * n;
                        UNROLL_LOOP
                        for (int j = j0; j < j1; j++) ci[j] += aip * bp[j];
                    }
                }
#endif
            }
        }
    }
}
