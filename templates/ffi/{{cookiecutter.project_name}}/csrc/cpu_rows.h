// The op's rows on the CPU, as plain C++ with no XLA dependency, so that the
// XLA handlers (cpu_handlers.cc) and the sanitizer driver (kernel_check.cc)
// share the exact same code. The row arithmetic is the op's kernel file
// (csrc/<op>_kernels.h, through op.h); CpuRow below is how it runs on the CPU.
//
// Rows are contiguous (row-major). Sums accumulate in double whatever the
// storage type; the element-wise passes run in the storage type's compute
// type (float for float32 and bfloat16, double for float64).
//
// Speed: each row is read once from memory and its later passes hit the
// cache. Sums keep kLanes independent accumulators, so plain -O3 vectorises
// them without -ffast-math or -march. The entry points at the end are
// compiled once per instruction set (see cpu_kernels.cc) and the best one
// for the running CPU is picked at load time, so one portable binary still
// uses AVX2 or AVX-512 where present.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "op.h"
#include "rowwise.h"

namespace rowwise {
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

// Storage type -> compute type, residual type, and conversions: float and
// double compute and keep their residual in their own type, bfloat16 in float.
template <typename T>
struct Traits {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "the rows are computed for float, double and BFloat16");
  using Compute = T;
  using Residual = T;
  static T load(T v) { return v; }
  static T store(T v) { return v; }
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
#define ROWWISE_INLINE inline __attribute__((always_inline))
#else
#define ROWWISE_INLINE inline
#endif

inline constexpr std::int64_t kLanes = 16;

// One row on the CPU: the Row of rowwise.h, run by one thread.
template <typename T>
struct CpuRow {
  using Tr = Traits<T>;
  using Compute = typename Tr::Compute;
  std::int64_t n;

  static ROWWISE_INLINE Compute load(T v) { return Tr::load(v); }
  static ROWWISE_INLINE T store(Compute v) { return Tr::store(v); }

  // sum of f(i), with kLanes partial sums.
  template <typename F>
  ROWWISE_INLINE Accumulator sum(F&& f) const {
    Accumulator partial[kLanes] = {};
    const std::int64_t blocked = n - n % kLanes;
    for (std::int64_t i = 0; i < blocked; i += kLanes) {
      for (std::int64_t l = 0; l < kLanes; ++l) partial[l] += f(i + l);
    }
    Accumulator total = 0;
    for (std::int64_t i = blocked; i < n; ++i) {
      total += f(i);
    }
    for (std::int64_t l = 0; l < kLanes; ++l) total += partial[l];
    return total;
  }

  template <typename F>
  ROWWISE_INLINE Accumulator max(F&& f) const {
    Accumulator best = f(0);
    for (std::int64_t i = 1; i < n; ++i) best = std::max<Accumulator>(best, f(i));
    return best;
  }

  template <typename F>
  ROWWISE_INLINE void each(F&& f) const {
    for (std::int64_t i = 0; i < n; ++i) f(i);
  }
};

// Rows [begin, end) of the forward pass. x, y: rows x n; residual: rows.
template <typename T>
ROWWISE_INLINE void forward_rows(const T* x, T* y, typename Traits<T>::Residual* residual,
                                 std::int64_t begin, std::int64_t end, std::int64_t n,
                                 const op::Attributes& attributes) {
  const CpuRow<T> row{n};
  for (std::int64_t r = begin; r < end; ++r) {
    residual[r] = static_cast<typename Traits<T>::Residual>(
        op::forward_row(row, x + r * n, y + r * n, attributes));
  }
}

// Rows [begin, end) of the backward pass: dx from x, the forward's residual
// and the output cotangent g.
template <typename T>
ROWWISE_INLINE void backward_rows(const T* x, const typename Traits<T>::Residual* residual,
                                  const T* g, T* dx, std::int64_t begin, std::int64_t end,
                                  std::int64_t n, const op::Attributes& attributes) {
  const CpuRow<T> row{n};
  for (std::int64_t r = begin; r < end; ++r) {
    op::backward_row(row, x + r * n, static_cast<double>(residual[r]), g + r * n, dx + r * n,
                     attributes);
  }
}

// Entry points, one per storage type, defined in cpu_kernels.cc.
#define ROWWISE_DECLARE(T)                                                                  \
  void forward(const T* x, T* y, Traits<T>::Residual* residual, std::int64_t begin,        \
               std::int64_t end, std::int64_t n, const op::Attributes& attributes);         \
  void backward(const T* x, const Traits<T>::Residual* residual, const T* g, T* dx,        \
                std::int64_t begin, std::int64_t end, std::int64_t n,                       \
                const op::Attributes& attributes);
ROWWISE_DECLARE(float)
ROWWISE_DECLARE(double)
ROWWISE_DECLARE(BFloat16)
#undef ROWWISE_DECLARE

}  // namespace rowwise
