// Scaled RMS normalisation over the last axis: one row, forward and backward,
// for the CPU and (cuda=yes) the CUDA handlers alike (csrc/rowwise.h says
// what a Row provides and what this file must define).
//
//   forward:  r = 1 / sqrt(sum(x^2) / n + eps)    y = scale * x * r    residual r
//   backward: k = r^2 * sum(g * x) / n            dx = scale * r * (g - k * x)
//
// (k rather than r^3 * sum(g * x) / n: for x near float32's largest squares,
// r^3 underflows float32 where k does not.)
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

#include "rowwise.h"

namespace rowwise::op {

// A row must be whole on one device: the forward sums its squares.
inline constexpr bool kNeedsWholeRows = true;

// Two attributes, valid values for kernel_check, their names and checks.
struct Attributes {
  double eps = 1e-6;
  double scale = 1.0;
};
inline constexpr std::array<const char*, 2> kAttributeNames = {"eps", "scale"};

inline const char* attributes_problem(const Attributes& a) {
  if (!(a.eps >= 0.0 && std::isfinite(a.eps))) return "eps must be finite and >= 0";
  if (!std::isfinite(a.scale)) return "scale must be finite";
  return nullptr;
}

template <typename Row, typename T>
ROWWISE_HD double forward_row(const Row& row, const T* x, T* y, const Attributes& a) {
  using C = typename Row::Compute;
  const Accumulator sum_of_squares = row.sum([&](std::int64_t i) {
    const Accumulator v = Row::load(x[i]);
    return v * v;
  });
  const double r = 1.0 / std::sqrt(sum_of_squares / static_cast<double>(row.n) + a.eps);
  const C factor = static_cast<C>(a.scale * r);
  row.each([&](std::int64_t i) { y[i] = Row::store(Row::load(x[i]) * factor); });
  return r;
}

template <typename Row, typename T>
ROWWISE_HD void backward_row(const Row& row, const T* x, double r, const T* g, T* dx,
                             const Attributes& a) {
  using C = typename Row::Compute;
  const Accumulator sum_gx = row.sum([&](std::int64_t i) {
    return static_cast<Accumulator>(Row::load(g[i])) * static_cast<Accumulator>(Row::load(x[i]));
  });
  const C sr = static_cast<C>(a.scale * r);
  const C k = static_cast<C>(r * r * (sum_gx / static_cast<double>(row.n)));
  row.each([&](std::int64_t i) {
    dx[i] = Row::store(sr * (Row::load(g[i]) - k * Row::load(x[i])));
  });
}

}  // namespace rowwise::op
