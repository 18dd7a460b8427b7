// How a CUDA thread block runs one row (cuda_handlers.cu), as code that
// compiles for the CPU too.
//
// Each of the block's kBlockThreads threads takes the elements first,
// first + kBlockThreads, ... of the row (first = its thread index): BlockRow
// is the Row of rowwise.h for one thread. Its sums and maxima take the
// thread's share (strided_sum, strided_max) and hand it to `Block`, which
// combines the shares of all threads: on the GPU with warp shuffles
// (GpuBlock in cuda_handlers.cu, the only part that needs a GPU); in
// kernel_check.cc, built by the ordinary C++ compiler, by computing every
// thread's share in turn. So the GPU code's numbers, overflow included, are
// tested on a machine without a GPU.
//
// `Tr` supplies the storage type's compute type and conversions
// (Tr::Compute, Tr::load, Tr::store): Device<T> in cuda_handlers.cu, and
// Traits<T> from cpu_rows.h in kernel_check.cc.
#pragma once

#include <cmath>
#include <cstdint>

#include "rowwise.h"

namespace rowwise {

inline constexpr int kBlockThreads = 256;  // threads per block, a multiple of 32

// One thread's share of the sum of f(i) over a row of n elements.
template <typename F>
ROWWISE_HD Accumulator strided_sum(const F& f, std::int64_t n, std::int64_t first,
                                   std::int64_t stride) {
  Accumulator sum = 0;
  for (std::int64_t i = first; i < n; i += stride) sum += f(i);
  return sum;
}

// One thread's share of the largest f(i); -inf for a thread with no element.
template <typename F>
ROWWISE_HD Accumulator strided_max(const F& f, std::int64_t n, std::int64_t first,
                                   std::int64_t stride) {
  Accumulator best = -HUGE_VAL;
  for (std::int64_t i = first; i < n; i += stride) {
    const Accumulator v = f(i);
    best = v > best ? v : best;
  }
  return best;
}

template <typename Tr, typename Block>
struct BlockRow {
  using Compute = typename Tr::Compute;
  std::int64_t n;
  std::int64_t first;  // this thread's index in the block
  Block block;

  template <typename V>
  static ROWWISE_HD Compute load(V v) {
    return Tr::load(v);
  }
  static ROWWISE_HD auto store(Compute v) { return Tr::store(v); }

  template <typename F>
  ROWWISE_HD Accumulator sum(const F& f) const {
    const std::int64_t length = n;
    return block.sum([&](std::int64_t t) { return strided_sum(f, length, t, kBlockThreads); },
                     first);
  }

  template <typename F>
  ROWWISE_HD Accumulator max(const F& f) const {
    const std::int64_t length = n;
    return block.max([&](std::int64_t t) { return strided_max(f, length, t, kBlockThreads); },
                     first);
  }

  template <typename F>
  ROWWISE_HD void each(const F& f) const {
    for (std::int64_t i = first; i < n; i += kBlockThreads) f(i);
  }
};

}  // namespace rowwise
