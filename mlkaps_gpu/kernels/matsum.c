/*
 * Sum of the n x m matrix a (row-major doubles) with OpenMP (a reduction over rows).
 *
 *   double matsum(int n, int m, const double *a)
 *
 * Design: T, the OpenMP thread count (set by the executor's glue with omp_set_num_threads).
 */
#include <stddef.h>

double matsum(int n, int m, const double *a)
{
    double total = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : total)
    for (int i = 0; i < n; i++) {
        const double *row = a + (size_t)i * (size_t)m;
        double s = 0.0;
        for (int j = 0; j < m; j++) s += row[j];
        total += s;
    }
    return total;
}
