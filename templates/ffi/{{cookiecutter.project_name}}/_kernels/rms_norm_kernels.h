// RMS normalisation over the last axis: one row, forward and backward, for
// the CPU and (cuda=yes) the CUDA handlers alike (csrc/rowwise.h says what
// a Row provides and what this file must define).
//
//   forward:  r = 1 / sqrt(sum(x^2) / n + eps)    y = x * r    residual r
//   backward: c = r^3 * sum(g * x) / n            dx = r * g - c * x
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

#include "rowwise.h"

namespace rowwise::op {

// A row must be whole on one device: the forward sums its squares.
inline constexpr bool kNeedsWholeRows = true;

// The FFI call's one attribute, eps (a valid value here, for kernel_check),
// its name as Python passes it, and its check.
struct Attributes {
  double eps = 1e-6;
};
inline constexpr std::array<const char*, 1> kAttributeNames = {"eps"};

inline const char* attributes_problem(const Attributes& a) {
  return a.eps >= 0.0 && std::isfinite(a.eps) ? nullptr : "eps must be finite and >= 0";
}

// r = 1 / rms of a row of n elements, from the sum of their squares.
ROWWISE_HD double inverse_rms(Accumulator sum_of_squares, std::int64_t n, double eps) {
  return 1.0 / std::sqrt(sum_of_squares / static_cast<double>(n) + eps);
}

// c in dx = r * g - c * x, from r and sum(g * x) over the row.
ROWWISE_HD double backward_coefficient(double r, Accumulator sum_gx, std::int64_t n) {
  return r * r * r * (sum_gx / static_cast<double>(n));
}

// One fused multiply-add, spelt out: r * g is not rounded before c * x is
// taken from it, which counts where the two cancel (a row of one element:
// dx there is 10% off without the fma, 5% with it). Not left to the
// compiler: it would contract r * g - c * x only in the copies of
// cpu_kernels.cc whose target has FMA, so the CPU would pick the result
// (CMakeLists.txt turns contraction off). A CPU without FMA instructions gets
// the same bits from the C library's fma, and CUDA has its own.
template <typename C>
ROWWISE_HD C input_gradient(C r, C g, C c, C x) {
  return std::fma(r, g, -(c * x));
}

// The element-wise passes run in Row::Compute, with r and c rounded to it
// once per row.
template <typename Row, typename T>
ROWWISE_HD double forward_row(const Row& row, const T* x, T* y, const Attributes& a) {
  using C = typename Row::Compute;
  const Accumulator sum_of_squares = row.sum([&](std::int64_t i) {
    const Accumulator v = Row::load(x[i]);
    return v * v;
  });
  const double r = inverse_rms(sum_of_squares, row.n, a.eps);
  const C rc = static_cast<C>(r);
  row.each([&](std::int64_t i) { y[i] = Row::store(Row::load(x[i]) * rc); });
  return r;
}

template <typename Row, typename T>
ROWWISE_HD void backward_row(const Row& row, const T* x, double r, const T* g, T* dx,
                             const Attributes&) {
  using C = typename Row::Compute;
  const Accumulator sum_gx = row.sum([&](std::int64_t i) {
    return static_cast<Accumulator>(Row::load(g[i])) * static_cast<Accumulator>(Row::load(x[i]));
  });
  const C rc = static_cast<C>(r), c = static_cast<C>(backward_coefficient(r, sum_gx, row.n));
  row.each([&](std::int64_t i) {
    dx[i] = Row::store(input_gradient(rc, Row::load(g[i]), c, Row::load(x[i])));
  });
}

}  // namespace rowwise::op
