// The arithmetic of one row of RMS normalisation, shared by the CPU kernels
// (rms_norm_kernels.h) and, in a project generated with cuda=yes, the CUDA
// kernels (rms_norm_cuda.cu): both compute the same numbers in the same
// types, and a change here reaches both.
//
//   forward:  r = 1 / sqrt(sum(x^2) / n + eps)    y = x * r
//   backward: c = r^3 * sum(g * x) / n            dx = r * g - c * x
//
// Nothing here but arithmetic on scalars: the functions compile for the GPU
// under nvcc and for the CPU everywhere, so kernel_check.cc checks them with
// the ordinary C++ compiler.
#pragma once

#include <cmath>
#include <cstdint>

// Under nvcc the functions exist for the GPU and the CPU alike; elsewhere
// they are plain inline functions.
#if defined(__CUDACC__)
#define RMS_NORM_HOST_DEVICE __host__ __device__ inline
#else
#define RMS_NORM_HOST_DEVICE inline
#endif

namespace rms_norm {

// Sums of squares and of products accumulate in double whatever the storage
// type: the square of a float32 above about 1.8e19 overflows float32, which
// would make r = 0 for rows that are perfectly representable, and a float sum
// of many terms loses digits long before that.
using Accumulator = double;

// r = 1 / rms of a row of n elements, from the sum of their squares.
RMS_NORM_HOST_DEVICE double inverse_rms(Accumulator sum_of_squares, std::int64_t n, double eps) {
  return 1.0 / std::sqrt(sum_of_squares / static_cast<double>(n) + eps);
}

// c in dx = r * g - c * x, from r and sum(g * x) over the row.
RMS_NORM_HOST_DEVICE double backward_coefficient(double r, Accumulator sum_gx, std::int64_t n) {
  return r * r * r * (sum_gx / static_cast<double>(n));
}

// The element-wise passes run in the storage type's compute type C (float for
// float32 and bfloat16, double for float64), with r and c rounded to C once
// per row.
template <typename C>
RMS_NORM_HOST_DEVICE C normalised(C x, C r) {
  return x * r;
}

template <typename C>
RMS_NORM_HOST_DEVICE C input_gradient(C r, C g, C c, C x) {
  return r * g - c * x;
}

}  // namespace rms_norm
