// Counter-based N(0, 1) draws fused with relative noise, for robuststats' "philox" stream.
//
// Philox4x32-10 (Salmon, Moraes, Dror & Shaw 2011, "Parallel random numbers: as easy as
// 1, 2, 3", SC'11): ten rounds of two 32x32->64-bit multiplies with the Weyl key schedule.
// Element a (an absolute position in the stream) lies in tile T = a / 1024 at j = a % 1024;
// it takes the Philox block of counter (256*T + j % 256, 0, 0) under the stream's 64-bit key,
// lane j / 256 of that block's Box-Muller pair of pairs:
//   lane 0: r(w0) cos t(w1), lane 1: r(w0) sin t(w1), lane 2: r(w2) cos t(w3), lane 3: r(w2) sin t(w3)
// with r(w) = sqrt(-2 ln u(w)), u(w) = float(w >> 1) * 2^-31 + 2^-32 in (0, 1], and t(w) the
// angle 2 pi (w >> 8) / 2^24. Every value is a function of (key, a) alone: the same for any
// thread count and any split of a draw into calls.
//
// ln, sin and cos are written out in float arithmetic (no libm call in the loops) so that the
// compiler vectorises them; built with -ffp-contract=off and without -ffast-math, every
// operation is one correctly rounded IEEE operation, so results do not depend on the ISA.

#include <torch/extension.h>
#include <ATen/Parallel.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace {

constexpr int64_t kTile = 1024;        // elements per tile
constexpr int64_t kBlocks = kTile / 4;  // Philox blocks per tile
constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // multipliers (Salmon et al. 2011)
constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // key schedule (golden ratio, sqrt 3 - 1)

inline void philox_round(uint32_t& c0, uint32_t& c1, uint32_t& c2, uint32_t& c3,
                         uint32_t k0, uint32_t k1) {
  const uint64_t p0 = uint64_t(kM0) * c0;
  const uint64_t p1 = uint64_t(kM1) * c2;
  const uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0;
  const uint32_t n2 = uint32_t(p0 >> 32) ^ c3 ^ k1;
  c1 = uint32_t(p1);
  c3 = uint32_t(p0);
  c0 = n0;
  c2 = n2;
}

// Philox4x32-10 of the counters (base + b, 0, 0) for b in [0, kBlocks), structure of arrays.
void philox_tile(uint64_t key, uint64_t base, uint32_t* w0, uint32_t* w1, uint32_t* w2,
                 uint32_t* w3) {
  const uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
  const uint32_t hi = uint32_t(base >> 32), lo = uint32_t(base);
  for (int64_t b = 0; b < kBlocks; ++b) {
    w0[b] = lo + uint32_t(b);  // base is a multiple of kBlocks: no carry into the high word
    w1[b] = hi;
    w2[b] = 0;
    w3[b] = 0;
  }
  uint32_t a0 = k0, a1 = k1;
  for (int r = 0; r < 10; ++r) {
    for (int64_t b = 0; b < kBlocks; ++b) {
      uint32_t c0 = w0[b], c1 = w1[b], c2 = w2[b], c3 = w3[b];
      philox_round(c0, c1, c2, c3, a0, a1);
      w0[b] = c0; w1[b] = c1; w2[b] = c2; w3[b] = c3;
    }
    a0 += kW0;
    a1 += kW1;
  }
}

inline uint32_t bits_of(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float float_of(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// -2 ln u for u in (0, 1]: u = m 2^e with m in [sqrt(1/2), sqrt(2)); ln m = 2 atanh(s),
// s = (m - 1) / (m + 1), |s| < 0.1716, series to s^11 (truncation < 1e-10 relative).
inline float minus_two_log(float u) {
  const uint32_t ub = bits_of(u);
  int32_t e = int32_t(ub >> 23) - 127;
  float m = float_of((ub & 0x007FFFFFu) | 0x3F800000u);  // [1, 2)
  const bool big = m > 1.41421356f;
  m = big ? m * 0.5f : m;
  e = big ? e + 1 : e;
  const float f = m - 1.0f;  // exact (Sterbenz)
  const float s = f / (m + 1.0f);
  const float s2 = s * s;
  const float p = 1.0f + s2 * (1.0f / 3 + s2 * (1.0f / 5 + s2 * (1.0f / 7 + s2 * (1.0f / 9 + s2 * (1.0f / 11)))));
  const float ln = float(e) * 0.693147180559945f + 2.0f * s * p;
  return -2.0f * ln;
}

// sine and cosine of phi in [-pi/4, pi/4]: Taylor series to x^11 and x^12 (< 3e-10 absolute).
inline float sin_small(float x) {
  const float x2 = x * x;
  return x * (1.0f + x2 * (-1.0f / 6 + x2 * (1.0f / 120 + x2 * (-1.0f / 5040 + x2 * (1.0f / 362880 + x2 * (-1.0f / 39916800))))));
}
inline float cos_small(float x) {
  const float x2 = x * x;
  return 1.0f + x2 * (-0.5f + x2 * (1.0f / 24 + x2 * (-1.0f / 720 + x2 * (1.0f / 40320 + x2 * (-1.0f / 3628800 + x2 * (1.0f / 479001600))))));
}

// N(0, 1) numbers of one tile, z[j] for j in [0, kTile), in the lane layout above.
void normals_tile(uint64_t key, uint64_t tile, float* z) {
  alignas(64) uint32_t w0[kBlocks], w1[kBlocks], w2[kBlocks], w3[kBlocks];
  philox_tile(key, tile * uint64_t(kBlocks), w0, w1, w2, w3);
  for (int half = 0; half < 2; ++half) {
    const uint32_t* wr = half ? w2 : w0;
    const uint32_t* wt = half ? w3 : w1;
    float* zc = z + (2 * half) * kBlocks;
    float* zs = zc + kBlocks;
    for (int64_t b = 0; b < kBlocks; ++b) {
      const float u = float(int32_t(wr[b] >> 1)) * 4.656612873077393e-10f + 2.3283064365386963e-10f;
      const float r = __builtin_sqrtf(minus_two_log(u));
      // angle in quarter turns: q = nearest quadrant, phi = remainder in [-pi/4, pi/4)
      const int32_t t = int32_t(wt[b] >> 8);          // [0, 2^24)
      const int32_t q = (t + (1 << 21)) >> 22;        // 0..4
      const float phi = float(t - (q << 22)) * 3.7450702829239286e-07f;  // (pi/2) / 2^22
      const float s = sin_small(phi), c = cos_small(phi);
      const int32_t qq = q & 3;
      const float cs = qq == 0 ? c : qq == 1 ? -s : qq == 2 ? -c : s;
      const float sn = qq == 0 ? s : qq == 1 ? c : qq == 2 ? -s : -c;
      zc[b] = r * cs;
      zs[b] = r * sn;
    }
  }
}

inline float load(float v) { return v; }
inline float load(at::BFloat16 v) { return float_of(uint32_t(v.x) << 16); }
inline float load(at::Half v) { return float(v); }

inline void store(float& d, float v) { d = v; }
inline void store(at::BFloat16& d, float v) {  // round to nearest even; NaN as 0xFFFF,
  const uint32_t u = bits_of(v);                  // as torch's vectorised conversion writes it
  const uint32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  d.x = uint16_t((u & 0x7FFFFFFFu) > 0x7F800000u ? 0xFFFFu : r);
}
inline void store(at::Half& d, float v) { d = at::Half(v); }

// Sum of squares over one span, in 16 float lanes (vectorisable without reassociation),
// the lanes summed in double in a fixed order.
template <typename F>
double sumsq(int64_t n, F value) {
  float acc[16] = {0};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int l = 0; l < 16; ++l) { const float v = value(i + l); acc[l] += v * v; }
  double total = 0;
  for (; i < n; ++i) { const double v = value(i); total += v * v; }
  for (int l = 0; l < 16; ++l) total += acc[l];
  return total;
}

int64_t grain(int64_t tiles) { return tiles < 8 ? tiles : 4; }

}  // namespace

// N(0, 1) draws at stream positions [offset, offset + numel) into a contiguous float32 tensor.
void normal_(torch::Tensor out, int64_t key, int64_t offset) {
  TORCH_CHECK(out.device().is_cpu() && out.is_contiguous() && out.scalar_type() == at::kFloat,
              "philox normal_: a contiguous float32 CPU tensor is required");
  float* p = out.data_ptr<float>();
  const int64_t n = out.numel();
  if (n == 0) return;
  const uint64_t k = uint64_t(key), start = uint64_t(offset);
  const int64_t t0 = int64_t(start / kTile), t1 = int64_t((start + n - 1) / kTile) + 1;
  at::parallel_for(0, t1 - t0, grain(t1 - t0), [&](int64_t lo, int64_t hi) {
    alignas(64) float z[kTile];
    for (int64_t t = t0 + lo; t < t0 + hi; ++t) {
      normals_tile(k, uint64_t(t), z);
      const int64_t a0 = std::max<int64_t>(t * kTile, int64_t(start));
      const int64_t a1 = std::min<int64_t>((t + 1) * kTile, int64_t(start) + n);
      std::memcpy(p + (a0 - int64_t(start)), z + (a0 - t * kTile), sizeof(float) * (a1 - a0));
    }
  });
}

// y <- fma(eps * y, scale, y) in one pass, eps the draws at [offset, offset + numel); returns
// float64 (||y||^2, ||realised error||^2) of the unperturbed y. Low-precision y is computed in
// float32 and rounded once; its error is the rounded result minus y, in float32.
template <typename T>
torch::Tensor perturb_impl(torch::Tensor y, uint64_t key, uint64_t start, float scale) {
  T* p = y.data_ptr<T>();
  const int64_t n = y.numel();
  const int64_t t0 = int64_t(start / kTile), t1 = n ? int64_t((start + n - 1) / kTile) + 1 : t0;
  std::vector<double> parts(2 * (t1 - t0), 0.0);
  at::parallel_for(0, t1 - t0, grain(t1 - t0), [&](int64_t lo, int64_t hi) {
    alignas(64) float z[kTile];
    alignas(64) float yf[kTile];
    alignas(64) float ef[kTile];
    for (int64_t t = t0 + lo; t < t0 + hi; ++t) {
      normals_tile(key, uint64_t(t), z);
      const int64_t a0 = std::max<int64_t>(t * kTile, int64_t(start));
      const int64_t a1 = std::min<int64_t>((t + 1) * kTile, int64_t(start) + n);
      const int64_t m = a1 - a0;
      T* d = p + (a0 - int64_t(start));
      const float* zz = z + (a0 - t * kTile);
      for (int64_t i = 0; i < m; ++i) {
        const float v = load(d[i]);
        const float e = zz[i] * v;
        yf[i] = v;
        // one rounding, as torch.add(y, e, alpha=scale) does it: the fused pass is bitwise
        // the unfused form (randn, mul, add) on the same draws
        const float out = __builtin_fmaf(e, scale, v);
        store(d[i], out);
        ef[i] = load(d[i]) - v;
      }
      parts[2 * (t - t0)] = sumsq(m, [&](int64_t i) { return yf[i]; });
      parts[2 * (t - t0) + 1] = sumsq(m, [&](int64_t i) { return ef[i]; });
    }
  });
  double s0 = 0, s1 = 0;
  for (int64_t t = 0; t < t1 - t0; ++t) { s0 += parts[2 * t]; s1 += parts[2 * t + 1]; }
  return torch::tensor({s0, s1}, torch::dtype(torch::kFloat64));
}

torch::Tensor perturb_relative_(torch::Tensor y, int64_t key, int64_t offset, double scale) {
  TORCH_CHECK(y.device().is_cpu() && y.is_contiguous(),
              "philox perturb_relative_: a contiguous CPU tensor is required");
  const uint64_t k = uint64_t(key), start = uint64_t(offset);
  const float s = float(scale);
  switch (y.scalar_type()) {
    case at::kFloat: return perturb_impl<float>(y, k, start, s);
    case at::kBFloat16: return perturb_impl<at::BFloat16>(y, k, start, s);
    case at::kHalf: return perturb_impl<at::Half>(y, k, start, s);
    default: TORCH_CHECK(false, "philox perturb_relative_: float32, bfloat16 or float16 required");
  }
}

// The four output words of Philox4x32-10 for one counter and key (known-answer checks).
std::vector<int64_t> block(std::vector<int64_t> counter, std::vector<int64_t> key) {
  TORCH_CHECK(counter.size() == 4 && key.size() == 2, "philox block: 4 counter words, 2 key words");
  uint32_t c0 = uint32_t(counter[0]), c1 = uint32_t(counter[1]);
  uint32_t c2 = uint32_t(counter[2]), c3 = uint32_t(counter[3]);
  uint32_t k0 = uint32_t(key[0]), k1 = uint32_t(key[1]);
  for (int r = 0; r < 10; ++r) {
    philox_round(c0, c1, c2, c3, k0, k1);
    k0 += kW0;
    k1 += kW1;
  }
  return {c0, c1, c2, c3};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("normal_", &normal_, "N(0, 1) draws at stream positions", py::call_guard<py::gil_scoped_release>());
  m.def("perturb_relative_", &perturb_relative_, "fused relative Gaussian noise",
        py::call_guard<py::gil_scoped_release>());
  m.def("block", &block, "Philox4x32-10 of one counter");
}
