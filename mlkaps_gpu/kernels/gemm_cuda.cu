/*
 * Tiled matrix product C = A * B on the GPU (row-major doubles, C overwritten).
 *
 *   extern "C" __global__ void gemm_tiled(int m, int n, int k, const double *a,
 *                                         const double *b, double *c)
 *
 * a: m x k, b: k x n, c: m x n. One thread per element of C; a block of
 * BLOCK_X x BLOCK_Y threads computes a BLOCK_Y x BLOCK_X tile of C, staging TILE_K-wide
 * slices of A and B in shared memory.
 *
 * Compile-time design (-D NAME=value): BLOCK_X, BLOCK_Y (also the launch's block shape; the
 * grid is ceil(n / BLOCK_X) x ceil(m / BLOCK_Y)), TILE_K.
 */
#ifndef BLOCK_X
#define BLOCK_X 16
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 16
#endif
#ifndef TILE_K
#define TILE_K 16
#endif

extern "C" __global__ void gemm_tiled(int m, int n, int k, const double *__restrict__ a,
                                      const double *__restrict__ b, double *__restrict__ c)
{
    __shared__ double as[BLOCK_Y][TILE_K];
    __shared__ double bs[TILE_K][BLOCK_X];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * BLOCK_Y + ty;
    const int col = blockIdx.x * BLOCK_X + tx;
    double acc = 0.0;
    for (int k0 = 0; k0 < k; k0 += TILE_K) {
        for (int t = tx; t < TILE_K; t += BLOCK_X) {
            const int p = k0 + t;
            as[ty][t] = (row < m && p < k) ? a[(size_t)row * k + p] : 0.0;
        }
        for (int t = ty; t < TILE_K; t += BLOCK_Y) {
            const int p = k0 + t;
            bs[t][tx] = (p < k && col < n) ? b[(size_t)p * n + col] : 0.0;
        }
        __syncthreads();
#pragma unroll
        for (int t = 0; t < TILE_K; t++) acc += as[ty][t] * bs[t][tx];
        __syncthreads();
    }
    if (row < m && col < n) c[(size_t)row * n + col] = acc;
}
