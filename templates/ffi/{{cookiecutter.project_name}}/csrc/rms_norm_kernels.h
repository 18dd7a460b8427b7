// RMS normalisation over the last axis on the CPU, as plain C++ with no XLA
// dependency, so that the XLA handlers (rms_norm_cpu.cc) and the sanitizer
// driver (kernel_check.cc) share the exact same code. The per-row arithmetic
// (the formulas, and the types they run in) lives in rms_norm_row.h.
//
// Rows are contiguous (row-major). Sums accumulate in double whatever the
// storage type; the element-wise passes run in the storage type's compute
// type (float for float32 and bfloat16, double for float64).
//
// Speed: each row is read once from memory and its second pass hits the
// cache. Inner loops keep kLanes independent accumulators and use restrict
// pointers, so plain -O3 vectorises them without -ffast-math or -march. The
// entry points at the end are compiled once per instruction set (see
// rms_norm_kernels.cc) and the best one for the running CPU is picked at load
// time, so one portable binary still uses AVX2 or AVX-512 where present.
#pragma once

#include <cstdint>
#include <cstring>

#include "rms_norm_row.h"

namespace rms_norm {

// bfloat16 as stored by XLA: the top 16 bits of a float32.
struct BFloat16 {
  std::uint16_t bits;
};

inline float to_float(BFloat16 v) {
  std::uint32_t u = static_cast<std::uint32_t>(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline BFloat16 to_bfloat16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it a (quiet) NaN
    return BFloat16{static_cast<std::uint16_t>((u >> 16) | 0x0040u)};
  }
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return BFloat16{static_cast<std::uint16_t>(u >> 16)};
}

// Storage type -> compute type, residual type, and conversions.
template <typename T>
struct Traits;

template <>
struct Traits<float> {
  using Compute = float;
  using Residual = float;
  static float load(float v) { return v; }
  static float store(float v) { return v; }
};

template <>
struct Traits<double> {
  using Compute = double;
  using Residual = double;
  static double load(double v) { return v; }
  static double store(double v) { return v; }
};

template <>
struct Traits<BFloat16> {
  using Compute = float;
  using Residual = float;
  static float load(BFloat16 v) { return to_float(v); }
  static BFloat16 store(float v) { return to_bfloat16(v); }
};

// Forced inlining puts the loops into each per-ISA entry point, so that each
// copy is vectorised for its own instruction set.
#if defined(__GNUC__)
#define RMS_NORM_INLINE inline __attribute__((always_inline))
#else
#define RMS_NORM_INLINE inline
#endif

inline constexpr std::int64_t kLanes = 16;

// sum(a * b) over n elements, with kLanes partial sums.
template <typename T>
RMS_NORM_INLINE Accumulator dot(const T* __restrict a, const T* __restrict b, std::int64_t n) {
  using Tr = Traits<T>;
  Accumulator partial[kLanes] = {};
  const std::int64_t blocked = n - n % kLanes;
  for (std::int64_t i = 0; i < blocked; i += kLanes) {
    for (std::int64_t l = 0; l < kLanes; ++l) {
      partial[l] += static_cast<Accumulator>(Tr::load(a[i + l])) *
                    static_cast<Accumulator>(Tr::load(b[i + l]));
    }
  }
  Accumulator total = 0;
  for (std::int64_t i = blocked; i < n; ++i) {
    total += static_cast<Accumulator>(Tr::load(a[i])) * static_cast<Accumulator>(Tr::load(b[i]));
  }
  for (std::int64_t l = 0; l < kLanes; ++l) total += partial[l];
  return total;
}

// Rows [begin, end) of the forward pass. x, y: rows x n; rinv: rows.
template <typename T>
RMS_NORM_INLINE void forward_rows(const T* __restrict x, T* __restrict y,
                  typename Traits<T>::Residual* __restrict rinv, std::int64_t begin,
                  std::int64_t end, std::int64_t n, double eps) {
  using Tr = Traits<T>;
  using C = typename Tr::Compute;
  for (std::int64_t row = begin; row < end; ++row) {
    const T* __restrict xr = x + row * n;
    T* __restrict yr = y + row * n;
    const double r = inverse_rms(dot(xr, xr, n), n, eps);
    const C rc = static_cast<C>(r);
    for (std::int64_t i = 0; i < n; ++i) yr[i] = Tr::store(normalised(Tr::load(xr[i]), rc));
    rinv[row] = static_cast<typename Tr::Residual>(r);
  }
}

// Rows [begin, end) of the backward pass: dx from x, the forward's rinv and
// the output cotangent g.
template <typename T>
RMS_NORM_INLINE void backward_rows(const T* __restrict x, const typename Traits<T>::Residual* __restrict rinv,
                   const T* __restrict g, T* __restrict dx, std::int64_t begin, std::int64_t end,
                   std::int64_t n) {
  using Tr = Traits<T>;
  using C = typename Tr::Compute;
  for (std::int64_t row = begin; row < end; ++row) {
    const T* __restrict xr = x + row * n;
    const T* __restrict gr = g + row * n;
    T* __restrict dxr = dx + row * n;
    const double r = static_cast<double>(rinv[row]);
    const C rc = static_cast<C>(r);
    const C c = static_cast<C>(backward_coefficient(r, dot(gr, xr, n), n));
    for (std::int64_t i = 0; i < n; ++i) {
      dxr[i] = Tr::store(input_gradient(rc, Tr::load(gr[i]), c, Tr::load(xr[i])));
    }
  }
}

// Entry points, one per storage type, defined in rms_norm_kernels.cc.
#define RMS_NORM_DECLARE(T)                                                                 \
  void forward(const T* x, T* y, Traits<T>::Residual* rinv, std::int64_t begin,            \
               std::int64_t end, std::int64_t n, double eps);                               \
  void backward(const T* x, const Traits<T>::Residual* rinv, const T* g, T* dx,            \
                std::int64_t begin, std::int64_t end, std::int64_t n);
RMS_NORM_DECLARE(float)
RMS_NORM_DECLARE(double)
RMS_NORM_DECLARE(BFloat16)
#undef RMS_NORM_DECLARE

}  // namespace rms_norm
