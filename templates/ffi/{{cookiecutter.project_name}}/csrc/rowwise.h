// The contract between the machinery in csrc/ and your op's kernel file,
// csrc/<op>_kernels.h (the one C++ file you write; CMake finds it by name and
// includes it through the generated header op.h).
//
// The op is row-wise over the last axis of one input x: each row of n
// elements gives a row of y (same shape and dtype) and one scalar per row,
// the residual, that the backward pass gets back with the row of x and the
// row of the cotangent g to compute the row of dx. The op's attributes
// (compile-time constants of the FFI call: none, one or several, each a
// double, named as Python passes them) reach the checks, the forward and the
// backward. The kernel file defines, in namespace rowwise::op:
//
//   // true if a row must be whole on one device (the op reduces over it): a
//   // row split across devices is then gathered first. false for an
//   // element-wise op: each device computes its part of a split row, so
//   // forward_row's residual must not depend on the row (return 0).
//   inline constexpr bool kNeedsWholeRows = true;
//   // one double member per attribute, each set to a valid value (the one
//   // kernel_check runs the rows with), and their names in the same order
//   struct Attributes { double eps = 1e-6; };
//   inline constexpr std::array<const char*, 1> kAttributeNames = {"eps"};
//   // nullptr if the attributes' values are fine, else what is wrong with them
//   inline const char* attributes_problem(const Attributes& a);
//   // one row: writes y, returns the residual
//   template <typename Row, typename T>
//   ROWWISE_HD double forward_row(const Row& row, const T* x, T* y, const Attributes& a);
//   // one row: writes dx from x, the residual and the cotangent g
//   template <typename Row, typename T>
//   ROWWISE_HD void backward_row(const Row& row, const T* x, double residual, const T* g, T* dx,
//                                const Attributes& a);
//
// An op without attributes declares `struct Attributes {};` and
// `std::array<const char*, 0> kAttributeNames = {};`.
//
// A Row is how the machinery runs the row: write the functions as if one
// thread did it all, and only through these members (every index loop goes
// through them, so the CPU can vectorise them and a CUDA thread block can
// split them):
//
//   row.n                      the row length (>= 1)
//   Row::Compute               the type element-wise arithmetic runs in:
//                              float for float32 and bfloat16, double for float64
//   Row::load(v), Row::store(c) storage type <-> Compute
//   row.sum(f)                 the sum of f(i) over i in [0, n), as Accumulator;
//                              f(i) returns an Accumulator
//   row.max(f)                 the largest f(i), as Accumulator
//   row.each(f)                f(i) for every i (on the GPU each thread
//                              calls it for its own share of the i)
//
// Nothing here but declarations and arithmetic on scalars: the kernel file
// compiles for the GPU under nvcc and for the CPU everywhere, so
// kernel_check.cc checks the CUDA kernels' numbers with the ordinary C++
// compiler.
#pragma once

#include <cmath>
#include <cstdint>

// Under nvcc the functions exist for the GPU and the CPU alike; elsewhere
// they are plain inline functions.
#if defined(__CUDACC__)
#define ROWWISE_HD __host__ __device__ inline
#else
#define ROWWISE_HD inline
#endif

namespace rowwise {

// Sums accumulate in double whatever the storage type: the square of a
// float32 above about 1.8e19 overflows float32, and a float sum of many terms
// loses digits long before that.
using Accumulator = double;

}  // namespace rowwise
