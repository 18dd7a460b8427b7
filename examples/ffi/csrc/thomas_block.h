// The Thomas algorithm of thomas.h for many systems at once: the fast path
// for batches, which are the common case (one system per grid line, per rod,
// per spline).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace tridiagonal {

// Systems solved side by side by ThomasBlock.
inline constexpr std::int64_t kLanes = 16;
// A block costs about as much as 4 systems solved one by one, so fewer than
// this many systems are solved one by one.
inline constexpr std::int64_t kMinLanesForBlock = 4;
// Rows per tile: a tile of every operand fits in the L1 cache with room to spare.
inline constexpr std::int64_t kTileRows = 16;

// Solves up to kLanes systems at once with the same arithmetic as
// thomas_solve, so with the same results, bit for bit.
//
// Why: one system is a chain of dependent divisions, so a single solve waits
// on the divider's latency at every row and uses one SIMD lane. Row i of
// different systems is independent, so the block works in lane-major order
// (row i of all kLanes systems side by side), where every inner loop runs
// across systems: it vectorises, and the divisions of different systems
// overlap.
//
// XLA stores the systems one after another (system-major), so the block
// transposes as it goes, kTileRows rows at a time: a tile of the operands is
// copied into small lane-major buffers that stay in the L1 cache, and only the
// two sequences the back substitution needs (upper and y) are kept for the
// whole system. (Transposing whole systems up front instead was slower in
// bench.py.)
template <typename T>
class ThomasBlock {
 public:
  explicit ThomasBlock(std::int64_t n) : n_(n), upper_(n * kLanes), y_(n * kLanes) {}

  // Systems k..k+lanes-1 of the batch (lanes <= kLanes); each pointer points
  // at system k. Unused lanes solve the identity, which never has a zero pivot.
  void solve(const T* dl, const T* d, const T* du, const T* b, T* x, std::int64_t lanes) {
    const std::int64_t n = n_;
    T* upper = upper_.data();
    T* y = y_.data();
    // The smallest |pivot| per system: zero marks a system to fill with NaN.
    // (A running minimum vectorises; an early exit per system would not.)
    T smallest[kLanes];
    T upper_prev[kLanes], y_prev[kLanes];
    for (std::int64_t l = 0; l < kLanes; ++l) {
      smallest[l] = std::numeric_limits<T>::infinity();
      upper_prev[l] = y_prev[l] = T(0);  // row 0 has no left neighbour
    }
    for (std::int64_t i0 = 0; i0 < n; i0 += kTileRows) {
      const std::int64_t rows = std::min(kTileRows, n - i0);
      load_tile(dl, i0, rows, lanes, T(0), dl_tile_);
      load_tile(d, i0, rows, lanes, T(1), d_tile_);
      load_tile(du, i0, rows, lanes, T(0), du_tile_);
      load_tile(b, i0, rows, lanes, T(0), b_tile_);
      if (i0 == 0) std::fill(dl_tile_, dl_tile_ + kLanes, T(0));  // dl[0] is ignored
      for (std::int64_t r = 0; r < rows; ++r) {
        T* upper_i = upper + (i0 + r) * kLanes;
        T* y_i = y + (i0 + r) * kLanes;
        for (std::int64_t l = 0; l < kLanes; ++l) {
          const T dl_il = dl_tile_[r * kLanes + l];
          const T pivot = d_tile_[r * kLanes + l] - dl_il * upper_prev[l];
          smallest[l] = std::min(smallest[l], std::abs(pivot));
          const T inverse = T(1) / pivot;
          upper_i[l] = upper_prev[l] = du_tile_[r * kLanes + l] * inverse;
          y_i[l] = y_prev[l] = (b_tile_[r * kLanes + l] - dl_il * y_prev[l]) * inverse;
        }
      }
    }
    // Back substitution, last tile first, each tile stored to x once done.
    bool singular[kLanes];
    for (std::int64_t l = 0; l < kLanes; ++l) singular[l] = smallest[l] == T(0);
    for (std::int64_t i1 = n; i1 > 0; i1 -= kTileRows) {
      const std::int64_t i0 = std::max<std::int64_t>(0, i1 - kTileRows);
      for (std::int64_t i = std::min(i1, n - 1) - 1; i >= i0; --i) {
        for (std::int64_t l = 0; l < kLanes; ++l) {
          y[i * kLanes + l] -= upper[i * kLanes + l] * y[(i + 1) * kLanes + l];
        }
      }
      for (std::int64_t l = 0; l < lanes; ++l) {
        for (std::int64_t i = i0; i < i1; ++i) {
          x[l * n + i] = singular[l] ? std::numeric_limits<T>::quiet_NaN() : y[i * kLanes + l];
        }
      }
    }
  }

 private:
  // Rows i0..i0+rows-1 of the first `lanes` systems at `system_major` (one
  // system of n values after another), lane-major into `tile`; `padding` in
  // the lanes beyond.
  void load_tile(const T* system_major, std::int64_t i0, std::int64_t rows, std::int64_t lanes,
                 T padding, T* tile) const {
    for (std::int64_t l = 0; l < lanes; ++l) {
      const T* row = system_major + l * n_ + i0;
      for (std::int64_t r = 0; r < rows; ++r) tile[r * kLanes + l] = row[r];
    }
    for (std::int64_t l = lanes; l < kLanes; ++l) {
      for (std::int64_t r = 0; r < rows; ++r) tile[r * kLanes + l] = padding;
    }
  }

  std::int64_t n_;
  std::vector<T> upper_, y_;
  T dl_tile_[kTileRows * kLanes], d_tile_[kTileRows * kLanes];
  T du_tile_[kTileRows * kLanes], b_tile_[kTileRows * kLanes];
};

}  // namespace tridiagonal
