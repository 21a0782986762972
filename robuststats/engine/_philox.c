/* Counter-based N(0, 1) draws fused with relative noise, for robuststats' "philox" stream.
 *
 * Philox4x32-10 (Salmon, Moraes, Dror & Shaw 2011, "Parallel random numbers: as easy as
 * 1, 2, 3", SC'11): ten rounds of two 32x32->64-bit multiplies with the Weyl key schedule.
 * Element a (an absolute position in the stream) lies in tile T = a / 1024 at j = a % 1024;
 * it takes the Philox block of counter (256*T + j % 256, 0, 0) under the stream's 64-bit key,
 * lane j / 256 of that block's Box-Muller pair of pairs:
 *   lane 0: r(w0) cos t(w1), lane 1: r(w0) sin t(w1), lane 2: r(w2) cos t(w3), lane 3: r(w2) sin t(w3)
 * with r(w) = sqrt(-2 ln u(w)), u(w) = float(w >> 1) * 2^-31 + 2^-32 in (0, 1], and t(w) the
 * angle 2 pi (w >> 8) / 2^24. Every value is a function of (key, a) alone: the same for any
 * thread count and any split of a draw into calls.
 *
 * ln, sin and cos are written out in float arithmetic (no libm call in the loops) so that the
 * compiler vectorises them; built with -ffp-contract=off and without -ffast-math, every
 * operation is one correctly rounded IEEE operation, so results do not depend on the ISA.
 * Where AVX-512 is available the Philox rounds are written with its intrinsics (the compiler
 * would widen the 32x32->64-bit products to vpmullq); they are integer operations, so the
 * words are those of the portable loop, which builds for other CPUs (tested bitwise).
 *
 * Plain C with no dependency but the C library: the Python side (_philox.py) compiles it with
 * the host compiler, loads it with ctypes and splits a call into whole tiles over its own
 * threads. Each entry point works on a tile range [tile_lo, tile_hi) of one call, so that the
 * ranges can run concurrently; no state is shared between calls.
 */

#include <math.h>
#include <stdint.h>
#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__F16C__) || defined(__AVX512F__))
#include <immintrin.h>
#endif
#if (defined(__x86_64__) || defined(__i386__)) && defined(__F16C__)
#define RS_F16C 1
#endif

#define TILE 1024                /* elements per tile */
#define BLOCKS (TILE / 4)        /* Philox blocks per tile */
#define M0 0xD2511F53u           /* multipliers (Salmon et al. 2011) */
#define M1 0xCD9E8D57u
#define W0 0x9E3779B9u           /* key schedule (golden ratio, sqrt 3 - 1) */
#define W1 0xBB67AE85u

/* dtype codes of rs_philox_perturb_into (the Python side passes them) */
enum { RS_FLOAT32 = 0, RS_BFLOAT16 = 1, RS_FLOAT16 = 2 };

#define RS_EXPORT __attribute__((visibility("default")))
#define ALIGN64 __attribute__((aligned(64)))

static inline void philox_round(uint32_t *c0, uint32_t *c1, uint32_t *c2, uint32_t *c3,
                                uint32_t k0, uint32_t k1) {
  const uint64_t p0 = (uint64_t)M0 * *c0;
  const uint64_t p1 = (uint64_t)M1 * *c2;
  const uint32_t n0 = (uint32_t)(p1 >> 32) ^ *c1 ^ k0;
  const uint32_t n2 = (uint32_t)(p0 >> 32) ^ *c3 ^ k1;
  *c1 = (uint32_t)p1;
  *c3 = (uint32_t)p0;
  *c0 = n0;
  *c2 = n2;
}

/* Philox4x32-10 of the counters (base + b, 0, 0) for b in [0, BLOCKS), structure of arrays. */
#if defined(__AVX512F__)
/* 16 lanes of the 32x32->64-bit products hi(M * c), lo(M * c): vpmuludq on the even and odd
 * lanes (compilers otherwise widen to 64 bits and use the slower vpmullq). Integer
 * arithmetic: the same words as the portable loop below. */
static inline void mul_hilo(__m512i c, __m512i m, __m512i *hi, __m512i *lo) {
  const __m512i even = _mm512_mul_epu32(c, m);
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(c, 32), m);
  *hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
  *lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
}

static void philox_tile(uint64_t key, uint64_t base, uint32_t *restrict w0, uint32_t *restrict w1,
                        uint32_t *restrict w2, uint32_t *restrict w3) {
  const uint32_t hi = (uint32_t)(base >> 32), lo = (uint32_t)base;
  const __m512i m0 = _mm512_set1_epi32((int)M0), m1 = _mm512_set1_epi32((int)M1);
  const __m512i step = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int b = 0; b < BLOCKS; b += 16) {
    /* base is a multiple of BLOCKS: no carry into the high word */
    __m512i c0 = _mm512_add_epi32(_mm512_set1_epi32((int)(lo + (uint32_t)b)), step);
    __m512i c1 = _mm512_set1_epi32((int)hi), c2 = _mm512_setzero_si512(), c3 = c2;
    uint32_t a0 = (uint32_t)key, a1 = (uint32_t)(key >> 32);
    for (int r = 0; r < 10; ++r) {
      __m512i h0, l0, h1, l1;
      mul_hilo(c0, m0, &h0, &l0);
      mul_hilo(c2, m1, &h1, &l1);
      const __m512i n0 = _mm512_xor_si512(_mm512_xor_si512(h1, c1), _mm512_set1_epi32((int)a0));
      const __m512i n2 = _mm512_xor_si512(_mm512_xor_si512(h0, c3), _mm512_set1_epi32((int)a1));
      c1 = l1;
      c3 = l0;
      c0 = n0;
      c2 = n2;
      a0 += W0;
      a1 += W1;
    }
    _mm512_store_si512((void *)(w0 + b), c0);
    _mm512_store_si512((void *)(w1 + b), c1);
    _mm512_store_si512((void *)(w2 + b), c2);
    _mm512_store_si512((void *)(w3 + b), c3);
  }
}
#else
static void philox_tile(uint64_t key, uint64_t base, uint32_t *restrict w0, uint32_t *restrict w1,
                        uint32_t *restrict w2, uint32_t *restrict w3) {
  const uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
  const uint32_t hi = (uint32_t)(base >> 32), lo = (uint32_t)base;
  for (int b = 0; b < BLOCKS; ++b) {
    w0[b] = lo + (uint32_t)b; /* base is a multiple of BLOCKS: no carry into the high word */
    w1[b] = hi;
    w2[b] = 0;
    w3[b] = 0;
  }
  uint32_t a0 = k0, a1 = k1;
  for (int r = 0; r < 10; ++r) {
    for (int b = 0; b < BLOCKS; ++b) {
      uint32_t c0 = w0[b], c1 = w1[b], c2 = w2[b], c3 = w3[b];
      philox_round(&c0, &c1, &c2, &c3, a0, a1);
      w0[b] = c0; w1[b] = c1; w2[b] = c2; w3[b] = c3;
    }
    a0 += W0;
    a1 += W1;
  }
}
#endif

static inline uint32_t bits_of(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float float_of(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* -2 ln u for u in (0, 1]: u = m 2^e with m in [sqrt(1/2), sqrt(2)); ln m = 2 atanh(s),
 * s = (m - 1) / (m + 1), |s| < 0.1716, series to s^11 (truncation < 1e-10 relative). */
static inline float minus_two_log(float u) {
  const uint32_t ub = bits_of(u);
  int32_t e = (int32_t)(ub >> 23) - 127;
  float m = float_of((ub & 0x007FFFFFu) | 0x3F800000u); /* [1, 2) */
  const int big = m > 1.41421356f;
  m = big ? m * 0.5f : m;
  e = big ? e + 1 : e;
  const float f = m - 1.0f; /* exact (Sterbenz) */
  const float s = f / (m + 1.0f);
  const float s2 = s * s;
  const float p = 1.0f + s2 * (1.0f / 3 + s2 * (1.0f / 5 + s2 * (1.0f / 7 + s2 * (1.0f / 9 + s2 * (1.0f / 11)))));
  const float ln = (float)e * 0.693147180559945f + 2.0f * s * p;
  return -2.0f * ln;
}

/* sine and cosine of phi in [-pi/4, pi/4]: Taylor series to x^11 and x^12 (< 3e-10 absolute). */
static inline float sin_small(float x) {
  const float x2 = x * x;
  return x * (1.0f + x2 * (-1.0f / 6 + x2 * (1.0f / 120 + x2 * (-1.0f / 5040 + x2 * (1.0f / 362880 + x2 * (-1.0f / 39916800))))));
}
static inline float cos_small(float x) {
  const float x2 = x * x;
  return 1.0f + x2 * (-0.5f + x2 * (1.0f / 24 + x2 * (-1.0f / 720 + x2 * (1.0f / 40320 + x2 * (-1.0f / 3628800 + x2 * (1.0f / 479001600))))));
}

/* N(0, 1) numbers of one tile, z[j] for j in [0, TILE), in the lane layout above. */
static void normals_tile(uint64_t key, uint64_t tile, float *restrict z) {
  ALIGN64 uint32_t w0[BLOCKS], w1[BLOCKS], w2[BLOCKS], w3[BLOCKS];
  philox_tile(key, tile * (uint64_t)BLOCKS, w0, w1, w2, w3);
  for (int half = 0; half < 2; ++half) {
    const uint32_t *wr = half ? w2 : w0;
    const uint32_t *wt = half ? w3 : w1;
    float *zc = z + (2 * half) * BLOCKS;
    float *zs = zc + BLOCKS;
    for (int b = 0; b < BLOCKS; ++b) {
      const float u = (float)(int32_t)(wr[b] >> 1) * 4.656612873077393e-10f + 2.3283064365386963e-10f;
      const float r = __builtin_sqrtf(minus_two_log(u));
      /* angle in quarter turns: q = nearest quadrant, phi = remainder in [-pi/4, pi/4) */
      const int32_t t = (int32_t)(wt[b] >> 8);        /* [0, 2^24) */
      const int32_t q = (t + (1 << 21)) >> 22;        /* 0..4 */
      const float phi = (float)(t - (q << 22)) * 3.7450702829239286e-07f; /* (pi/2) / 2^22 */
      const float s = sin_small(phi), c = cos_small(phi);
      const int32_t qq = q & 3;
      const float cs = qq == 0 ? c : qq == 1 ? -s : qq == 2 ? -c : s;
      const float sn = qq == 0 ? s : qq == 1 ? c : qq == 2 ? -s : -c;
      zc[b] = r * cs;
      zs[b] = r * sn;
    }
  }
}

/* bfloat16: the high half of a float32; stored rounded to nearest even, NaN as 0xFFFF (as
 * torch's vectorised conversion writes it). */
static inline float load_bf16(uint16_t h) { return float_of((uint32_t)h << 16); }
static inline uint16_t store_bf16(float v) {
  const uint32_t u = bits_of(v);
  const uint32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  return (uint16_t)((u & 0x7FFFFFFFu) > 0x7F800000u ? 0xFFFFu : r);
}

/* float16 <-> float32 as torch's c10::Half converts them on this machine: the F16C
 * instructions where the compiler targets them, the native type on ARM, otherwise the
 * bit-exact software conversion of c10 (FP16 library, Maratea). */
#if defined(RS_F16C)
static inline float load_f16(uint16_t h) { return _cvtsh_ss(h); }
static inline uint16_t store_f16(float v) { return (uint16_t)_cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT); }
#elif defined(__aarch64__)
static inline float load_f16(uint16_t h) { __fp16 x; memcpy(&x, &h, 2); return (float)x; }
static inline uint16_t store_f16(float v) { __fp16 x = (__fp16)v; uint16_t h; memcpy(&h, &x, 2); return h; }
#else
static inline float load_f16(uint16_t h) {
  const uint32_t w = (uint32_t)h << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const uint32_t exp_offset = 0xE0u << 23;
  const float exp_scale = float_of(0x7800000u); /* 2^-112 */
  const float normalized = float_of((two_w >> 4) + exp_offset) * exp_scale;
  const uint32_t magic_mask = 126u << 23;
  const float magic_bias = 0.5f;
  const float denormalized = float_of((two_w >> 17) | magic_mask) - magic_bias;
  const uint32_t denormalized_cutoff = 1u << 27;
  const uint32_t result = sign | (two_w < denormalized_cutoff ? bits_of(denormalized) : bits_of(normalized));
  return float_of(result);
}
static inline uint16_t store_f16(float f) {
  const float scale_to_inf = float_of(239u << 23), scale_to_zero = float_of(17u << 23);
  float base = (fabsf(f) * scale_to_inf) * scale_to_zero;
  const uint32_t w = bits_of(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = float_of((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = bits_of(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const uint32_t mantissa_bits = bits & 0x00000FFFu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return (uint16_t)((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}
#endif

/* Sum of squares of v[0, n), in 16 float lanes (vectorisable without reassociation), the
 * lanes summed in double in a fixed order. */
static double sumsq(int64_t n, const float *restrict v) {
  float acc[16] = {0};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int l = 0; l < 16; ++l) { const float x = v[i + l]; acc[l] += x * x; }
  double total = 0;
  for (; i < n; ++i) { const double x = v[i]; total += x * x; }
  for (int l = 0; l < 16; ++l) total += acc[l];
  return total;
}

static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Draws at stream positions [start, start + n) into out[0, n), the part of them that lies in
 * tiles [tile_lo, tile_hi). */
RS_EXPORT void rs_philox_normal(float *out, int64_t n, uint64_t key, uint64_t start,
                                int64_t tile_lo, int64_t tile_hi) {
  ALIGN64 float z[TILE];
  for (int64_t t = tile_lo; t < tile_hi; ++t) {
    normals_tile(key, (uint64_t)t, z);
    const int64_t a0 = max64(t * TILE, (int64_t)start);
    const int64_t a1 = min64((t + 1) * TILE, (int64_t)start + n);
    memcpy(out + (a0 - (int64_t)start), z + (a0 - t * TILE), sizeof(float) * (size_t)(a1 - a0));
  }
}

#define PERTURB_TILES(T, LOAD, STORE)                                                         \
  do {                                                                                        \
    const T *q = (const T *)src;                                                              \
    T *p = (T *)dst;                                                                          \
    for (int64_t t = tile_lo; t < tile_hi; ++t) {                                             \
      normals_tile(key, (uint64_t)t, z);                                                      \
      const int64_t a0 = max64(t * TILE, (int64_t)start);                                     \
      const int64_t a1 = min64((t + 1) * TILE, (int64_t)start + n);                           \
      const int64_t m = a1 - a0;                                                              \
      const T *s = q + (a0 - (int64_t)start);                                                 \
      T *d = p + (a0 - (int64_t)start);                                                       \
      const float *zz = z + (a0 - t * TILE);                                                  \
      for (int64_t i = 0; i < m; ++i) {                                                       \
        const float v = LOAD(s[i]);                                                           \
        const float e = zz[i] * v;                                                            \
        yf[i] = v;                                                                            \
        /* one rounding, as torch.add(y, e, alpha=scale) does it: the fused pass is bitwise   \
           the unfused form (randn, mul, add) on the same draws */                            \
        d[i] = STORE(__builtin_fmaf(e, scale, v));                                            \
        ef[i] = LOAD(d[i]) - v;                                                               \
      }                                                                                       \
      parts[2 * (t - tile_lo)] = sumsq(m, yf);                                                \
      parts[2 * (t - tile_lo) + 1] = sumsq(m, ef);                                            \
    }                                                                                         \
  } while (0)

#define LOAD_F32(x) (x)
#define STORE_F32(x) (x)

/* dst <- fma(eps * src, scale, src) for the part of src[0, n) (stream positions
 * [start, start + n)) that lies in tiles [tile_lo, tile_hi); parts[2k], parts[2k + 1] <-
 * float64 ||src||^2 and ||realised error||^2 over tile tile_lo + k. dst may be src (in place)
 * or a buffer of the same dtype and length that does not overlap it. Low-precision values are
 * computed in float32 and rounded once; their error is the rounded result minus src, in
 * float32. Returns 0, or -1 for an unknown dtype code. */
RS_EXPORT int rs_philox_perturb_into(const void *src, void *dst, int dtype, int64_t n,
                                     uint64_t key, uint64_t start, float scale, int64_t tile_lo,
                                     int64_t tile_hi, double *parts) {
  ALIGN64 float z[TILE];
  ALIGN64 float yf[TILE];
  ALIGN64 float ef[TILE];
  switch (dtype) {
    case RS_FLOAT32: PERTURB_TILES(float, LOAD_F32, STORE_F32); return 0;
    case RS_BFLOAT16: PERTURB_TILES(uint16_t, load_bf16, store_bf16); return 0;
    case RS_FLOAT16: PERTURB_TILES(uint16_t, load_f16, store_f16); return 0;
    default: return -1;
  }
}

/* A NaN sum as one fixed quiet NaN: which NaN an addition of two NaNs keeps depends on the
 * operand order the compiler picks, so without this the sign and payload of a NaN norm would
 * depend on the compiler. */
static inline double canonical(double x) {
  const uint64_t quiet_nan = 0x7FF8000000000000u;
  double q;
  memcpy(&q, &quiet_nan, 8);
  return isnan(x) ? q : x;
}

/* out[0], out[1] <- the sums of parts[2k] and parts[2k + 1] over k in [0, tiles), in order. */
RS_EXPORT void rs_philox_sum_parts(const double *parts, int64_t tiles, double *out) {
  double s0 = 0, s1 = 0;
  for (int64_t t = 0; t < tiles; ++t) { s0 += parts[2 * t]; s1 += parts[2 * t + 1]; }
  out[0] = canonical(s0);
  out[1] = canonical(s1);
}

/* The four output words of Philox4x32-10 for one counter and key (known-answer checks). */
RS_EXPORT void rs_philox_block(const uint32_t *counter, const uint32_t *key, uint32_t *out) {
  uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; ++r) {
    philox_round(&c0, &c1, &c2, &c3, k0, k1);
    k0 += W0;
    k1 += W1;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}
