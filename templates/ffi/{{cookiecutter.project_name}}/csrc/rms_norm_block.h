// How a CUDA thread block computes one row (rms_norm_cuda.cu), as code that
// compiles for the CPU too.
//
// Each of the block's kBlockThreads threads takes the elements first,
// first + kBlockThreads, ... of the row (first = its thread index): it sums
// its share (strided_dot), the block adds up the threads' sums (block_sum in
// rms_norm_cuda.cu, the only part that needs a GPU), and every thread then
// writes its share of the output (forward_share, backward_share) with the
// row arithmetic of rms_norm_row.h. kernel_check.cc, built by the ordinary
// C++ compiler, runs the same functions for every thread of a block in turn
// and checks the results: the GPU code's numbers, overflow included, are
// tested on a machine without a GPU.
//
// `Tr` supplies the storage type's compute type and conversions
// (Tr::Compute, Tr::load, Tr::store): Device<T> in rms_norm_cuda.cu, and
// Traits<T> from rms_norm_kernels.h in kernel_check.cc.
#pragma once

#include <cstdint>

#include "rms_norm_row.h"

namespace rms_norm {

inline constexpr int kBlockThreads = 256;  // threads per block, a multiple of 32

// One thread's share of sum(a * b) over a row of n elements.
template <typename Tr, typename T>
RMS_NORM_HOST_DEVICE Accumulator strided_dot(const T* a, const T* b, std::int64_t n,
                                             std::int64_t first, std::int64_t stride) {
  Accumulator sum = 0;
  for (std::int64_t i = first; i < n; i += stride) {
    sum += static_cast<Accumulator>(Tr::load(a[i])) * static_cast<Accumulator>(Tr::load(b[i]));
  }
  return sum;
}

// One thread's share of y = x * r.
template <typename Tr, typename T>
RMS_NORM_HOST_DEVICE void forward_share(const T* x, T* y, std::int64_t n, std::int64_t first,
                                        std::int64_t stride, double r) {
  using C = typename Tr::Compute;
  const C rc = static_cast<C>(r);
  for (std::int64_t i = first; i < n; i += stride) y[i] = Tr::store(normalised(Tr::load(x[i]), rc));
}

// One thread's share of dx = r * g - c * x.
template <typename Tr, typename T>
RMS_NORM_HOST_DEVICE void backward_share(const T* x, const T* g, T* dx, std::int64_t n,
                                         std::int64_t first, std::int64_t stride, double r,
                                         double c) {
  using C = typename Tr::Compute;
  const C rc = static_cast<C>(r), cc = static_cast<C>(c);
  for (std::int64_t i = first; i < n; i += stride) {
    dx[i] = Tr::store(input_gradient(rc, Tr::load(g[i]), cc, Tr::load(x[i])));
  }
}

}  // namespace rms_norm
