// Your op, one row at a time, for the CPU and (cuda=yes) the CUDA handlers
// alike: csrc/rowwise.h says what a Row provides and what this file must
// define. The starter is the identity: y = x, dx = g.
#pragma once

#include <cmath>
#include <cstdint>

#include "rowwise.h"

namespace rowwise::op {

// TODO: your attribute's name (as your op passes it to the FFI call) and its check.
inline constexpr const char kAttribute[] = "eps";

inline const char* attribute_problem(double eps) {
  return eps >= 0.0 && std::isfinite(eps) ? nullptr : "eps must be finite and >= 0";
}

// TODO: your forward pass for one row: write y, return the residual the
// backward pass needs (one number per row; 0 if it needs none).
template <typename Row, typename T>
ROWWISE_HD double forward_row(const Row& row, const T* x, T* y, double eps) {
  (void)eps;
  row.each([&](std::int64_t i) { y[i] = Row::store(Row::load(x[i])); });
  return 0.0;
}

// TODO: your backward pass for one row: dx from x, the residual and the
// cotangent g of y.
template <typename Row, typename T>
ROWWISE_HD void backward_row(const Row& row, const T* x, double residual, const T* g, T* dx) {
  (void)x;
  (void)residual;
  row.each([&](std::int64_t i) { dx[i] = Row::store(Row::load(g[i])); });
}

}  // namespace rowwise::op
