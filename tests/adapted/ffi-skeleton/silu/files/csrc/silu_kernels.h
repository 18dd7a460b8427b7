// SiLU, x * sigmoid(x), element by element: one row, forward and backward,
// for the CPU and (cuda=yes) the CUDA handlers alike (csrc/rowwise.h says
// what a Row provides and what this file must define).
//
//   forward:  s = 1 / (1 + exp(-x))    y = x * s    residual 0 (none needed)
//   backward: dx = g * s * (1 + x * (1 - s))
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

#include "rowwise.h"

namespace rowwise::op {

// Element-wise: a device may hold part of a row.
inline constexpr bool kNeedsWholeRows = false;

// No attributes.
struct Attributes {};
inline constexpr std::array<const char*, 0> kAttributeNames = {};

inline const char* attributes_problem(const Attributes&) { return nullptr; }

template <typename C>
ROWWISE_HD C sigmoid(C x) {
  return C(1) / (C(1) + std::exp(-x));
}

template <typename Row, typename T>
ROWWISE_HD double forward_row(const Row& row, const T* x, T* y, const Attributes&) {
  row.each([&](std::int64_t i) {
    const auto v = Row::load(x[i]);
    y[i] = Row::store(v * sigmoid(v));
  });
  return 0.0;
}

template <typename Row, typename T>
ROWWISE_HD void backward_row(const Row& row, const T* x, double, const T* g, T* dx,
                             const Attributes&) {
  using C = typename Row::Compute;
  row.each([&](std::int64_t i) {
    const C v = Row::load(x[i]), s = sigmoid(v);
    dx[i] = Row::store(Row::load(g[i]) * s * (C(1) + v * (C(1) - s)));
  });
}

}  // namespace rowwise::op
