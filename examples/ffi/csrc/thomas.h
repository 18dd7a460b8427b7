// The Thomas algorithm: Gaussian elimination without pivoting, specialised to
// a tridiagonal matrix. One system of size n costs O(n) and is a strict
// sequential recurrence, which is why it suits a plain C++ loop and not XLA.
//
// Row i of the system reads  dl[i] x[i-1] + d[i] x[i] + du[i] x[i+1] = b[i],
// with dl[0] and du[n-1] ignored (jax.lax.linalg.tridiagonal_solve's
// convention).
//
// No pivoting: this is stable for diagonally dominant and for symmetric
// positive definite matrices (implicit heat-equation steps, cubic splines),
// not for a general nonsingular one. A pivot that is exactly zero makes the
// whole system's solution NaN, as jax.lax.linalg.tridiagonal_solve does for a
// singular matrix: never a crash, never a silently partial result.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

namespace tridiagonal {

// Solves one system; `upper` is scratch for n modified upper-diagonal
// entries. A zero pivot fills x with NaN.
template <typename T>
void thomas_solve(const T* dl, const T* d, const T* du, const T* b, T* x, T* upper,
                  std::int64_t n) {
  auto fail = [&] { std::fill(x, x + n, std::numeric_limits<T>::quiet_NaN()); };
  // Forward sweep: eliminate the lower diagonal. Afterwards row i reads
  // x[i] + upper[i] x[i+1] = y[i], with y kept in x.
  if (d[0] == T(0)) return fail();
  // One division and two products are cheaper than two divisions.
  T inverse = T(1) / d[0];
  upper[0] = du[0] * inverse;
  x[0] = b[0] * inverse;
  for (std::int64_t i = 1; i < n; ++i) {
    const T pivot = d[i] - dl[i] * upper[i - 1];
    if (pivot == T(0)) return fail();
    inverse = T(1) / pivot;
    upper[i] = du[i] * inverse;
    x[i] = (b[i] - dl[i] * x[i - 1]) * inverse;
  }
  // Back substitution; upper[n-1] (from the ignored du[n-1]) is never read.
  for (std::int64_t i = n - 2; i >= 0; --i) x[i] -= upper[i] * x[i + 1];
}

}  // namespace tridiagonal
