// gemm: C = alpha * A B + beta * C (then the epilogue chain), C row-major M x N with leading
// dimension ldc; A (M x K) and B (K x N) each row- or column-major (params a_layout, b_layout).
// Blocked by the tile params: a TILE_M x TILE_N block of C is accumulated over TILE_K-long
// slices of K, so the B slice it reads stays in cache while the rows of A stream; full tiles
// have compile-time trip counts (the column loop vectorizes), edge tiles take bounded loops.
// A column-major B is packed into row-major panels first (below). Work items are rows, tiled from
// the start of each thread's range; beta == 0 does not read C (it may hold NaN), as BLAS. The prelude gives the tile (0s in the params are resolved to the
// implementation's defaults before this text sees them).
// gate = silu / gelu / gelu_tanh (JITK_GATED): B's columns come in groups of 16, 8 gate then 8 up, and
// C is M x N / 2: C(r, j) = act(alpha g) * alpha u (+ beta C), then the chain, g and u the sums of
// group j / 8's gate and up column j % 8. A tile holds whole groups (the plan: tile_n % 16 == 0).
// rope = neox / page_size > 0 (JITK_QKV; include/jit/kernels/gemm.hpp): C is a QKV projection's output,
// rows of heads q heads, kv_heads k heads, kv_heads v heads of HD elements. Once a call's rows of C
// are written, each row's q and k heads are rotated in place (neox pairs (j, j + HD / 2), the angle
// positions[r] / theta^(2j / HD), as rotary_embedding computes it) and its k and v heads copied into
// the paged caches at slot slots[r] (as kv_cache_append; a slot outside the cache writes nothing).
#include "jitk_cpu.h"
#include "jitk_gate.h"

#if JITK_ROPE_NEOX || JITK_PAGE_SIZE > 0
#define JITK_QKV 1
constexpr i64 HD = JITK_HEAD_DIM, PAGE = JITK_PAGE_SIZE;
static_assert(HD > 0 && HD % 2 == 0, "gemm: the QKV epilogue's head_dim is even and positive (the family checks it)");
// Rows [r0, r1) of C, written: rotated (rope), then their k and v heads into the caches (page_size).
static void qkv_rows(T* __restrict c, i64 ldc, i64 r0, i64 r1, void* const* jitk_args) {
  const i64* positions = JITK_ARG(0, const i64*);
  const T theta = JITK_ARG(1, T);
  const i64* slots = JITK_ARG(2, const i64*);
  T* k_cache = JITK_ARG(3, T*);
  T* v_cache = JITK_ARG(4, T*);
  const i64 heads = JITK_ARG(5, i64), kv_heads = JITK_ARG(6, i64), num_pages = JITK_ARG(7, i64);
  (void)positions, (void)theta, (void)slots, (void)k_cache, (void)v_cache, (void)num_pages;
#if JITK_ROPE_NEOX
  constexpr i64 HALF = HD / 2;
  T inv_freq[HALF];
  for (i64 j = 0; j < HALF; ++j) inv_freq[j] = T(1) / jitk::pow(theta, T(2 * j) / T(HD));
#endif
  for (i64 r = r0; r < r1; ++r) {
    T* row = c + r * ldc;
#if JITK_ROPE_NEOX
    // (no heads: positions may be null, the host checks it only where a row has a head to turn)
    const T pos = heads + kv_heads > 0 ? T(positions[r]) : T(0);
    for (i64 j = 0; j < HALF; ++j) {
      const T angle = pos * inv_freq[j], cs = jitk::cos(angle), sn = jitk::sin(angle);
      for (i64 h = 0; h < heads + kv_heads; ++h) {
        T* x = row + h * HD;
        const T a = x[j], b = x[j + HALF];
        x[j] = a * cs - b * sn;
        x[j + HALF] = b * cs + a * sn;
      }
    }
#endif
#if JITK_PAGE_SIZE > 0
    if (kv_heads <= 0) continue;  // nothing to write: slots and the caches may be null (the host checks them only here)
    const i64 slot = slots[r];
    if (slot < 0 || slot >= num_pages * PAGE) continue;  // padding (-1), or no slot in the cache
    for (i64 h = 0; h < kv_heads; ++h) {
      const T* k = row + (heads + h) * HD;
      const T* v = row + (heads + kv_heads + h) * HD;
      T* kc = k_cache + (slot * kv_heads + h) * HD;
      T* vc = v_cache + (slot * kv_heads + h) * HD;
      for (i64 i = 0; i < HD; ++i) kc[i] = k[i], vc[i] = v[i];
    }
#endif
  }
}
#endif

constexpr i64 TM = JITK_TILE_M, TN = JITK_TILE_N, TK = JITK_TILE_K;
static_assert(TM * TN <= 4096, "gemm: tile_m * tile_n accumulators must fit in 4096");

#if JITK_A_LAYOUT_COL
#define JITK_A(i, k) a[(k) * lda + (i)]
#else
#define JITK_A(i, k) a[(i) * lda + (k)]
#endif
// acc += A(i0 .. i0 + rows, k) x B(k, 0 .. cols) for k in [k0, kend), B's row k (its tile's
// columns, contiguous) at brow(k). Full (rows == TM, cols == TN): k outermost, each step adding an
// outer product (TM values of A times TN of B) to the whole tile, which a small tile keeps in vector
// registers (4 x 64 floats: 16 AVX-512 registers); edge tiles: bounded loops.
template <bool Full, class BRow>
static inline void accumulate(T (&acc)[TM][TN], const T* __restrict a, i64 lda, i64 i0, i64 rows, i64 cols, i64 k0, i64 kend,
                              BRow brow) {
  if constexpr (Full) {
    for (i64 k = k0; k < kend; ++k) {
      T av[TM];
      for (i64 i = 0; i < TM; ++i) av[i] = JITK_A(i0 + i, k);
      const T* __restrict bk = brow(k);
      for (i64 i = 0; i < TM; ++i)
        for (i64 j = 0; j < TN; ++j) acc[i][j] += av[i] * bk[j];
    }
  } else {
    for (i64 i = 0; i < rows; ++i)
      for (i64 k = k0; k < kend; ++k) {
        const T av = JITK_A(i0 + i, k);
        const T* __restrict bk = brow(k);
        for (i64 j = 0; j < cols; ++j) acc[i][j] += av * bk[j];
      }
  }
}

#if JITK_GATED  // jitk_gate.h: gate = silu / gelu / gelu_tanh
constexpr i64 GB = 8;  // gate columns a group (then as many up columns)
static_assert(TN % (2 * GB) == 0, "gemm: a gated tile holds whole groups of gate and up columns");
#endif

// C(r, j0 .. j0 + cols) = alpha * sums + beta * C, then the chain. Gated: C(r, j0 / 2 .. (j0 + cols) / 2)
// from the groups of sums (j0 and cols are multiples of 16 then).
static inline void store_row(T* __restrict c, i64 ldc, i64 r, i64 j0, i64 cols, const T* sums, T alpha, T beta,
                             const jitk_chain& chain) {
#if JITK_GATED
  const i64 o0 = j0 / 2;
  T* __restrict crow = c + r * ldc + o0;
  for (i64 j = 0; j < cols / 2; ++j) {
    const i64 g = j / GB * 2 * GB + j % GB;
    const T prod = jitk::JITK_GATE_ACTIVATION(alpha * sums[g]) * (alpha * sums[g + GB]);
    const T v = beta == T(0) ? prod : prod + beta * crow[j];
    crow[j] = chain.epilogue(v, r * ldc + o0 + j, o0 + j);
  }
#else
  T* __restrict crow = c + r * ldc + j0;
  for (i64 j = 0; j < cols; ++j) {
    const T v = beta == T(0) ? alpha * sums[j] : alpha * sums[j] + beta * crow[j];
    crow[j] = chain.epilogue(v, r * ldc + j0 + j, j0 + j);
  }
#endif
}

#if !JITK_B_LAYOUT_COL
// B row-major: the C tile at (i0, j0), tm x tn of it inside C (Full: tm == TM and tn == TN), its
// sums in registers over the whole of K.
template <bool Full>
static inline void gemm_tile(const T* __restrict a, const T* __restrict b, T* __restrict c, i64 i0, i64 j0, i64 tm, i64 tn,
                             i64 K, i64 lda, i64 ldb, i64 ldc, T alpha, T beta, const jitk_chain& chain) {
  const i64 rows = Full ? TM : tm, cols = Full ? TN : tn;
  T acc[TM][TN];
  for (i64 i = 0; i < TM; ++i)
    for (i64 j = 0; j < TN; ++j) acc[i][j] = T(0);
  for (i64 k0 = 0; k0 < K; k0 += TK) {
    const i64 kend = K - k0 < TK ? K : k0 + TK;
    accumulate<Full>(acc, a, lda, i0, rows, cols, k0, kend, [&](i64 k) { return b + k * ldb + j0; });
  }
  for (i64 i = 0; i < rows; ++i) store_row(c, ldc, i0 + i, j0, cols, acc[i], alpha, beta, chain);
}
#else
// B column-major: a k's TN values of B lie ldb apart, so the tiles above would gather them one by
// one (30x slower than row-major B on AVX-512). Instead each TN-column, PK-deep slice of B is
// packed once into a row-major panel and every tile of a block of RB rows runs over it, the
// block's sums kept in `sums` between slices (both on the stack, 16384 elements at most): 7.8
// against 236 GFLOP/s at 768^3, f32, on the 2-core development VM.
constexpr i64 kPanel = 16384;
constexpr i64 PK = TK < kPanel / TN ? TK : (kPanel / TN > 0 ? kPanel / TN : 1);
constexpr i64 RB = kPanel / TN / TM * TM > TM ? kPanel / TN / TM * TM : TM;
static_assert(PK * TN <= kPanel && (RB * TN <= kPanel || RB == TM), "gemm: B panel or sums past their stack budget");

// sums[i][j] += A(r + i, k) * panel[k - k0][j] for one tile of the block, tm x tn of it (Full: TM x TN).
template <bool Full>
static inline void slice_tile(const T* __restrict a, i64 lda, i64 r, i64 tm, i64 tn, i64 k0, i64 kend,
                              const T* __restrict panel, T (*__restrict sums)[TN]) {
  const i64 rows = Full ? TM : tm, cols = Full ? TN : tn;
  T acc[TM][TN];
  for (i64 i = 0; i < rows; ++i)
    for (i64 j = 0; j < cols; ++j) acc[i][j] = sums[i][j];
  accumulate<Full>(acc, a, lda, r, rows, cols, k0, kend, [&](i64 k) { return panel + (k - k0) * TN; });
  for (i64 i = 0; i < rows; ++i)
    for (i64 j = 0; j < cols; ++j) sums[i][j] = acc[i][j];
}
#endif

JITK_CPU_KERNEL {
  const i64 M = JITK_ARG(0, i64), N = JITK_ARG(1, i64), K = JITK_ARG(2, i64);
  const T alpha = JITK_ARG(3, T);
  const T* a = JITK_ARG(4, const T*);
  const i64 lda = JITK_ARG(5, i64);
  const T* b = JITK_ARG(6, const T*);
  const i64 ldb = JITK_ARG(7, i64);
  const T beta = JITK_ARG(8, T);
  T* c = JITK_ARG(9, T*);
  const i64 ldc = JITK_ARG(10, i64);
  const jitk_chain chain = jitk_chain::from(jitk_args + 11);
  (void)M;
#if JITK_B_LAYOUT_COL
  T panel[PK * TN];
  T sums[RB][TN];
  for (i64 j0 = 0; j0 < N; j0 += TN) {
    const i64 tn = N - j0 < TN ? N - j0 : TN;
    for (i64 r0 = jitk_begin; r0 < jitk_end; r0 += RB) {
      const i64 rows = jitk_end - r0 < RB ? jitk_end - r0 : RB;
      for (i64 i = 0; i < rows; ++i)
        for (i64 j = 0; j < TN; ++j) sums[i][j] = T(0);
      for (i64 k0 = 0; k0 < K; k0 += PK) {
        const i64 kend = K - k0 < PK ? K : k0 + PK;
        // the panel: B(k, j0 + j) at panel[(k - k0) * TN + j], read down B's columns (contiguous)
        for (i64 j = 0; j < tn; ++j)
          for (i64 k = k0; k < kend; ++k) panel[(k - k0) * TN + j] = b[(j0 + j) * ldb + k];
        for (i64 i0 = 0; i0 < rows; i0 += TM) {
          const i64 tm = rows - i0 < TM ? rows - i0 : TM;
          if (tm == TM && tn == TN) slice_tile<true>(a, lda, r0 + i0, tm, tn, k0, kend, panel, sums + i0);
          else slice_tile<false>(a, lda, r0 + i0, tm, tn, k0, kend, panel, sums + i0);
        }
      }
      for (i64 i = 0; i < rows; ++i) store_row(c, ldc, r0 + i, j0, tn, sums[i], alpha, beta, chain);
    }
  }
#else
  for (i64 i0 = jitk_begin; i0 < jitk_end; i0 += TM) {
    const i64 tm = jitk_end - i0 < TM ? jitk_end - i0 : TM;
    for (i64 j0 = 0; j0 < N; j0 += TN) {
      const i64 tn = N - j0 < TN ? N - j0 : TN;
      if (tm == TM && tn == TN) gemm_tile<true>(a, b, c, i0, j0, tm, tn, K, lda, ldb, ldc, alpha, beta, chain);
      else gemm_tile<false>(a, b, c, i0, j0, tm, tn, K, lda, ldb, ldc, alpha, beta, chain);
    }
  }
#endif
#if JITK_QKV  // the QKV epilogue's arguments follow C's (no chain with it: the family refuses one)
  qkv_rows(c, ldc, jitk_begin, jitk_end, jitk_args + 11);
#endif
}
