// Softmax over the last axis: one row, forward and backward, for the CPU and
// (cuda=yes) the CUDA handlers alike (csrc/rowwise.h says what a Row
// provides and what this file must define).
//
//   forward:  m = max(x)   s = sum(exp(x - m))   y = exp(x - m) / s
//             residual: the log-sum-exp, lse = m + log(s)
//   backward: y = exp(x - lse)   dx = y * (g - sum(g * y))
#pragma once

#include <cmath>
#include <cstdint>

#include "rowwise.h"

namespace rowwise::op {

// The attribute keeps the signature of the other ops of this project (eps);
// softmax ignores it.
inline constexpr const char kAttribute[] = "eps";

inline const char* attribute_problem(double eps) {
  return eps >= 0.0 && std::isfinite(eps) ? nullptr : "eps must be finite and >= 0";
}

template <typename Row, typename T>
ROWWISE_HD double forward_row(const Row& row, const T* x, T* y, double) {
  using C = typename Row::Compute;
  const Accumulator m = row.max([&](std::int64_t i) { return Accumulator(Row::load(x[i])); });
  const C mc = static_cast<C>(m);
  const Accumulator s = row.sum([&](std::int64_t i) {
    return static_cast<Accumulator>(std::exp(Row::load(x[i]) - mc));
  });
  const C inverse = static_cast<C>(1.0 / s);
  row.each([&](std::int64_t i) { y[i] = Row::store(std::exp(Row::load(x[i]) - mc) * inverse); });
  return static_cast<double>(mc) + std::log(s);
}

template <typename Row, typename T>
ROWWISE_HD void backward_row(const Row& row, const T* x, double lse, const T* g, T* dx) {
  using C = typename Row::Compute;
  const C lc = static_cast<C>(lse);
  const Accumulator gy = row.sum([&](std::int64_t i) {
    return static_cast<Accumulator>(Row::load(g[i])) *
           static_cast<Accumulator>(std::exp(Row::load(x[i]) - lc));
  });
  const C gyc = static_cast<C>(gy);
  row.each([&](std::int64_t i) {
    const C yi = std::exp(Row::load(x[i]) - lc);
    dx[i] = Row::store(yi * (Row::load(g[i]) - gyc));
  });
}

}  // namespace rowwise::op
