// A standalone check of the kernels and of the row-parallel loop, without
// XLA: each result is compared with a naive double-precision loop. Its point
// is to run under AddressSanitizer and UndefinedBehaviorSanitizer, which do
// not load cleanly into a Python process beside jaxlib (see README.md):
//
//   cmake -S . -B build/asan -DRMS_NORM_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
//   cmake --build build/asan --target kernel_check && build/asan/kernel_check
//
// tests/test_kernel_check.py does exactly this. Exit status 0 means every
// check passed; a sanitizer report aborts with a non-zero status.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <mutex>
#include <random>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "rms_norm_kernels.h"
#include "rms_norm_parallel.h"

using namespace rms_norm;

namespace {

int failures = 0;

void expect(bool ok, const char* what, std::int64_t rows, std::int64_t n) {
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "FAILED: %s (rows=%lld, n=%lld)\n", what, static_cast<long long>(rows),
                 static_cast<long long>(n));
  }
}

// Stands in for ffi::ThreadPool: every task gets its own thread, joined when
// the pool is destroyed, so tasks may well start after parallel_rows returned.
class ThreadPerTask {
 public:
  explicit ThreadPerTask(std::int64_t threads) : threads_(threads) {}
  ~ThreadPerTask() {
    for (auto& t : running_) t.join();
  }
  std::int64_t num_threads() const { return threads_; }
  template <typename F>
  void Schedule(F&& f) {
    std::lock_guard<std::mutex> lock(mutex_);
    running_.emplace_back(std::forward<F>(f));
  }

 private:
  std::int64_t threads_;
  std::mutex mutex_;
  std::vector<std::thread> running_;
};

double tolerance(const float*) { return 2e-6; }
double tolerance(const double*) { return 1e-13; }
double tolerance(const BFloat16*) { return 1e-2; }

double as_double(float v) { return v; }
double as_double(double v) { return v; }
double as_double(BFloat16 v) { return to_float(v); }

template <typename T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    return to_bfloat16(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

template <typename T>
void check(std::int64_t rows, std::int64_t n, std::int64_t threads, std::mt19937& gen) {
  using R = typename Traits<T>::Residual;
  std::normal_distribution<double> normal;
  std::vector<T> x(rows * n), g(rows * n), y(rows * n), dx(rows * n);
  std::vector<R> rinv(rows);
  for (auto& v : x) v = from_double<T>(normal(gen));
  for (auto& v : g) v = from_double<T>(normal(gen));
  const double eps = 1e-6;
  {
    ThreadPerTask pool(threads);
    parallel_rows(pool, rows, n, [&](std::int64_t b, std::int64_t e) {
      forward(x.data(), y.data(), rinv.data(), b, e, n, eps);
    });
    parallel_rows(pool, rows, n, [&](std::int64_t b, std::int64_t e) {
      backward(x.data(), rinv.data(), g.data(), dx.data(), b, e, n);
    });
  }
  const double tol = tolerance(x.data());
  bool y_ok = true, dx_ok = true, r_ok = true;
  for (std::int64_t row = 0; row < rows; ++row) {
    double ss = 0, gx = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const double xv = as_double(x[row * n + i]);
      ss += xv * xv;
      gx += as_double(g[row * n + i]) * xv;
    }
    const double r = 1 / std::sqrt(ss / n + eps);
    r_ok &= std::abs(static_cast<double>(rinv[row]) - r) <= tol * r;
    double y_scale = 0, dx_scale = 0;
    std::vector<double> want_dx(n);
    for (std::int64_t i = 0; i < n; ++i) {
      const double xv = as_double(x[row * n + i]);
      const double term1 = r * as_double(g[row * n + i]), term2 = r * r * r * gx / n * xv;
      want_dx[i] = term1 - term2;
      y_scale = std::max(y_scale, std::abs(xv * r));
      // The two terms cancel when g is nearly parallel to x (always, for
      // n = 1): the error is relative to the terms, not to their difference.
      dx_scale = std::max(dx_scale, std::abs(term1) + std::abs(term2));
    }
    for (std::int64_t i = 0; i < n; ++i) {
      const double want_y = as_double(x[row * n + i]) * r;
      y_ok &= std::abs(as_double(y[row * n + i]) - want_y) <= tol * (std::abs(want_y) + y_scale);
      dx_ok &= std::abs(as_double(dx[row * n + i]) - want_dx[i]) <=
               10 * tol * (std::abs(want_dx[i]) + dx_scale);
    }
  }
  expect(r_ok, "rinv", rows, n);
  expect(y_ok, "forward", rows, n);
  expect(dx_ok, "backward", rows, n);
}

void check_bfloat16_rounding() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  expect(to_float(to_bfloat16(1.0f)) == 1.0f, "bfloat16 round trip", 0, 0);
  // 1 + 2^-8 lies halfway between two bfloat16 values: ties go to even (1.0).
  expect(to_float(to_bfloat16(1.0f + 1.0f / 256)) == 1.0f, "bfloat16 ties to even", 0, 0);
  expect(to_float(to_bfloat16(1.0f + 3.0f / 512)) == 1.0f + 1.0f / 128, "bfloat16 rounds up", 0,
         0);
  expect(std::isnan(to_float(to_bfloat16(nan))), "bfloat16 keeps NaN", 0, 0);
  expect(std::isinf(to_float(to_bfloat16(std::numeric_limits<float>::infinity()))),
         "bfloat16 keeps inf", 0, 0);
}

}  // namespace

int main() {
  std::mt19937 gen(1234);
  check_bfloat16_rounding();
  // Row lengths around the vector block (kLanes = 16) and odd tails; row
  // counts that give one chunk, several, and a ragged last chunk.
  for (std::int64_t n : {1, 3, 15, 16, 17, 100, 4099}) {
    for (std::int64_t rows : {1, 7, 300}) {
      for (std::int64_t threads : {0, 1, 3}) {
        check<float>(rows, n, threads, gen);
        check<double>(rows, n, threads, gen);
        check<BFloat16>(rows, n, threads, gen);
      }
    }
  }
  if (failures) {
    std::fprintf(stderr, "kernel_check: %d checks FAILED\n", failures);
    return 1;
  }
  std::printf("kernel_check: all checks passed\n");
  return 0;
}
