// Softmax over the last axis: one row, forward and backward, for the CPU and
// (cuda=yes) the CUDA handlers alike (csrc/rowwise.h says what a Row
// provides and what this file must define).
//
//   forward:  m = max(x)   s = sum(exp(x - m))   y = exp(x - m) / s
//             residual: m, exact in the residual's float32 (a log-sum-exp
//             rounded to float32 would be off by up to 4e-6 near 88, and
//             every y recomputed from it by as many parts)
//   backward: s and y again from m   dx = y * (g - sum(g * y))
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

#include "rowwise.h"

namespace rowwise::op {

// A row must be whole on one device: its maximum and its sum.
inline constexpr bool kNeedsWholeRows = true;

// No attributes.
struct Attributes {};
inline constexpr std::array<const char*, 0> kAttributeNames = {};

inline const char* attributes_problem(const Attributes&) { return nullptr; }

template <typename Row, typename T>
ROWWISE_HD double forward_row(const Row& row, const T* x, T* y, const Attributes&) {
  using C = typename Row::Compute;
  const Accumulator m = row.max([&](std::int64_t i) { return Accumulator(Row::load(x[i])); });
  const C mc = static_cast<C>(m);
  const Accumulator s = row.sum([&](std::int64_t i) {
    return static_cast<Accumulator>(std::exp(Row::load(x[i]) - mc));
  });
  const C inverse = static_cast<C>(1.0 / s);
  row.each([&](std::int64_t i) { y[i] = Row::store(std::exp(Row::load(x[i]) - mc) * inverse); });
  return static_cast<double>(mc);
}

template <typename Row, typename T>
ROWWISE_HD void backward_row(const Row& row, const T* x, double m, const T* g, T* dx,
                             const Attributes&) {
  using C = typename Row::Compute;
  const C mc = static_cast<C>(m);
  const Accumulator s = row.sum([&](std::int64_t i) {
    return static_cast<Accumulator>(std::exp(Row::load(x[i]) - mc));
  });
  const C inverse = static_cast<C>(1.0 / s);
  const Accumulator gy = row.sum([&](std::int64_t i) {
    return static_cast<Accumulator>(Row::load(g[i])) *
           static_cast<Accumulator>(std::exp(Row::load(x[i]) - mc) * inverse);
  });
  const C gyc = static_cast<C>(gy);
  row.each([&](std::int64_t i) {
    const C yi = std::exp(Row::load(x[i]) - mc) * inverse;
    dx[i] = Row::store(yi * (Row::load(g[i]) - gyc));
  });
}

}  // namespace rowwise::op
