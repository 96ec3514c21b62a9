// The straightforward blocked GEMM a user would write and compile ahead of time (g++ -O3
// -march=native, as the rest of jitk_bench_aot): C = alpha A B + beta C, row-major, i-k-j loops
// over 256-long K slices so the inner loop streams a row of B and C (it vectorizes). Same
// arguments as jitk's gemm (kernels.hpp Gemm::pack), work items = tiles of 4 rows.
extern "C" void aot_gemm_blocked_f32(void* const* args, long long begin, long long end) {
  auto arg = [&](int i) { return args[i]; };
  const long long M = *static_cast<long long*>(arg(0)), N = *static_cast<long long*>(arg(1)), K = *static_cast<long long*>(arg(2));
  const float alpha = *static_cast<float*>(arg(3));
  const float* a = *static_cast<const float* const*>(arg(4));
  const long long lda = *static_cast<long long*>(arg(5));
  const float* b = *static_cast<const float* const*>(arg(6));
  const long long ldb = *static_cast<long long*>(arg(7));
  const float beta = *static_cast<float*>(arg(8));
  float* c = *static_cast<float* const*>(arg(9));
  const long long ldc = *static_cast<long long*>(arg(10));
  constexpr long long kRowsPerItem = 4, kSlice = 256;
  const long long i_end = end * kRowsPerItem < M ? end * kRowsPerItem : M;
  for (long long i = begin * kRowsPerItem; i < i_end; ++i)
    for (long long j = 0; j < N; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
  for (long long k0 = 0; k0 < K; k0 += kSlice)
    for (long long i = begin * kRowsPerItem; i < i_end; ++i)
      for (long long k = k0; k < K && k < k0 + kSlice; ++k) {
        const float av = alpha * a[i * lda + k];
        float* __restrict crow = c + i * ldc;
        const float* __restrict brow = b + k * ldb;
        for (long long j = 0; j < N; ++j) crow[j] += av * brow[j];
      }
}
