/*
 * Blocked right-looking LU factorisation with partial pivoting (LAPACK dgetrf semantics),
 * ROW-MAJOR storage.
 *
 *   void lu(int m, int n, double *a, int lda, int *ipiv, int nb, int variant)
 *
 * a: m x n matrix, element (i, j) at a[i * lda + j] (lda >= n); overwritten by L (unit lower
 * triangle, diagonal not stored) and U, packed as LAPACK does. ipiv: min(m, n) ints, 0-based:
 * row i was interchanged with row ipiv[i] (what scipy.linalg.lu_factor returns for the same
 * numpy C-ordered array).
 *
 * Design:
 *   nb       block size (any value >= 1; nb >= min(m, n) factorises in one panel);
 *   variant  panel factorisation: 0 = unblocked (dgetf2), 1 = recursive (dgetrf2);
 *   TILE_M, TILE_N (compile-time) tile sizes of the trailing-matrix update and of the
 *            triangular solve (parallelised over tiles with OpenMP);
 *   threads  via omp_set_num_threads (done by the executor's glue).
 *
 * Every update adds the contributions of columns k in increasing order, whatever nb, variant
 * or tile sizes: all configurations compute the same floating-point operations in the same
 * order for each element, so they agree with each other to the last bits.
 */
#include <float.h>
#include <math.h>
#include <stddef.h>

#ifndef TILE_M
#define TILE_M 32
#endif
#ifndef TILE_N
#define TILE_N 64
#endif

#define A_(i, j) a[(size_t)(i) * (size_t)lda + (size_t)(j)]
/* below this many multiply-adds a loop nest runs on one thread */
#define PARALLEL_WORK 65536

static int imin(int x, int y) { return x < y ? x : y; }

/* Row of the first largest |a(i, k)|, i >= k (what idamax finds). */
static int find_pivot(int m, int k, const double *a, int lda)
{
    int p = k;
    double best = fabs(A_(k, k));
    for (int i = k + 1; i < m; i++) {
        double v = fabs(A_(i, k));
        if (v > best) {
            best = v;
            p = i;
        }
    }
    return p;
}

/* Swap rows r1 and r2 over columns [c0, c1). */
static void swap_rows(double *a, int lda, int r1, int r2, int c0, int c1)
{
    if (r1 == r2 || c0 >= c1) return;
    double *x = &A_(r1, 0);
    double *y = &A_(r2, 0);
    for (int j = c0; j < c1; j++) {
        double t = x[j];
        x[j] = y[j];
        y[j] = t;
    }
}

/* Scale rows k+1..m-1 of column k by 1 / a(k, k) (dgetf2's rule for tiny pivots). */
static void scale_column(int m, int k, double *a, int lda)
{
    double pivot = A_(k, k);
    if (fabs(pivot) >= DBL_MIN) {
        double r = 1.0 / pivot;
        for (int i = k + 1; i < m; i++) A_(i, k) *= r;
    } else {
        for (int i = k + 1; i < m; i++) A_(i, k) /= pivot;
    }
}

/* c(M x N) -= l(M x K) * u(K x N), all with leading dimension lda; tiled, OpenMP over tiles. */
static void update(int M, int N, int K, const double *l, const double *u, double *c, int lda)
{
    if (M <= 0 || N <= 0 || K <= 0) return;
    int tm = (M + TILE_M - 1) / TILE_M;
    int tn = (N + TILE_N - 1) / TILE_N;
    size_t work = (size_t)M * (size_t)N * (size_t)K;
#pragma omp parallel for collapse(2) schedule(static) if (work > PARALLEL_WORK)
    for (int bi = 0; bi < tm; bi++) {
        for (int bj = 0; bj < tn; bj++) {
            int i0 = bi * TILE_M, i1 = imin(i0 + TILE_M, M);
            int j0 = bj * TILE_N, j1 = imin(j0 + TILE_N, N);
            for (int i = i0; i < i1; i++) {
                double *ci = c + (size_t)i * (size_t)lda;
                const double *li = l + (size_t)i * (size_t)lda;
                for (int k = 0; k < K; k++) {
                    double lik = li[k];
                    const double *uk = u + (size_t)k * (size_t)lda;
                    for (int j = j0; j < j1; j++) ci[j] -= lik * uk[j];
                }
            }
        }
    }
}

/* b(K x N) = L^-1 b, L unit lower triangular K x K (in l); OpenMP over column tiles. */
static void trsm_unit_lower(int K, int N, const double *l, double *b, int lda)
{
    if (K <= 1 || N <= 0) return;
    int tn = (N + TILE_N - 1) / TILE_N;
    size_t work = (size_t)K * (size_t)K * (size_t)N / 2;
#pragma omp parallel for schedule(static) if (work > PARALLEL_WORK)
    for (int bj = 0; bj < tn; bj++) {
        int j0 = bj * TILE_N, j1 = imin(j0 + TILE_N, N);
        for (int i = 1; i < K; i++) {
            double *bi = b + (size_t)i * (size_t)lda;
            const double *li = l + (size_t)i * (size_t)lda;
            for (int k = 0; k < i; k++) {
                double lik = li[k];
                const double *bk = b + (size_t)k * (size_t)lda;
                for (int j = j0; j < j1; j++) bi[j] -= lik * bk[j];
            }
        }
    }
}

/* Unblocked panel (dgetf2): m x n, m >= n expected but any shape works. */
static void panel_unblocked(int m, int n, double *a, int lda, int *ipiv)
{
    int mn = imin(m, n);
    for (int k = 0; k < mn; k++) {
        int p = find_pivot(m, k, a, lda);
        ipiv[k] = p;
        if (A_(p, k) != 0.0) {
            swap_rows(a, lda, k, p, 0, n);
            scale_column(m, k, a, lda);
        }
        int rows = m - k - 1, cols = n - k - 1;
        if (rows > 0 && cols > 0) {
            size_t work = (size_t)rows * (size_t)cols;
#pragma omp parallel for schedule(static) if (work > PARALLEL_WORK)
            for (int i = k + 1; i < m; i++) {
                double lik = A_(i, k);
                double *ri = &A_(i, k + 1);
                const double *rk = &A_(k, k + 1);
                for (int j = 0; j < cols; j++) ri[j] -= lik * rk[j];
            }
        }
    }
}

/* Recursive panel (dgetrf2): split the columns in two halves. */
static void panel_recursive(int m, int n, double *a, int lda, int *ipiv)
{
    int mn = imin(m, n);
    if (mn == 0) return;
    if (m == 1) {
        ipiv[0] = 0;
        return;
    }
    if (n == 1) {
        int p = find_pivot(m, 0, a, lda);
        ipiv[0] = p;
        if (A_(p, 0) != 0.0) {
            swap_rows(a, lda, 0, p, 0, 1);
            scale_column(m, 0, a, lda);
        }
        return;
    }
    int n1 = mn / 2;
    int n2 = n - n1;
    panel_recursive(m, n1, a, lda, ipiv); /* [A11; A21] */
    for (int i = 0; i < n1; i++) swap_rows(a, lda, i, ipiv[i], n1, n);
    trsm_unit_lower(n1, n2, a, &A_(0, n1), lda);                  /* A12 = L11^-1 A12 */
    update(m - n1, n2, n1, &A_(n1, 0), &A_(0, n1), &A_(n1, n1), lda); /* A22 -= A21 A12 */
    panel_recursive(m - n1, n2, &A_(n1, n1), lda, ipiv + n1);
    for (int i = n1; i < mn; i++) {
        ipiv[i] += n1;
        swap_rows(a, lda, i, ipiv[i], 0, n1);
    }
}

void lu(int m, int n, double *a, int lda, int *ipiv, int nb, int variant)
{
    int mn = imin(m, n);
    if (nb < 1) nb = 1;
    for (int j = 0; j < mn; j += nb) {
        int jb = imin(nb, mn - j);
        if (variant == 1)
            panel_recursive(m - j, jb, &A_(j, j), lda, ipiv + j);
        else
            panel_unblocked(m - j, jb, &A_(j, j), lda, ipiv + j);
        for (int i = j; i < j + jb; i++) {
            ipiv[i] += j;
            swap_rows(a, lda, i, ipiv[i], 0, j);
            swap_rows(a, lda, i, ipiv[i], j + jb, n);
        }
        if (j + jb < n) {
            trsm_unit_lower(jb, n - j - jb, &A_(j, j), &A_(j, j + jb), lda);
            update(m - j - jb, n - j - jb, jb, &A_(j + jb, j), &A_(j, j + jb),
                   &A_(j + jb, j + jb), lda);
        }
    }
}
