/* b = transpose(a) for an m x n row-major matrix of doubles, by TILE x TILE blocks.
   TILE is set at compile time (-DTILE=...); the block rows are shared among the OpenMP
   threads in chunks of `chunk` block rows. */
#ifndef TILE
#define TILE 32
#endif

void transpose(int m, int n, const double *a, double *b, int chunk)
{
#pragma omp parallel for schedule(dynamic, chunk)
    for (int ii = 0; ii < m; ii += TILE) {
        int i_end = ii + TILE < m ? ii + TILE : m;
        for (int jj = 0; jj < n; jj += TILE) {
            int j_end = jj + TILE < n ? jj + TILE : n;
            for (int i = ii; i < i_end; ++i)
                for (int j = jj; j < j_end; ++j)
                    b[(long)j * m + i] = a[(long)i * n + j];
        }
    }
    (void)chunk; /* without OpenMP the pragma, and chunk, are ignored */
}
