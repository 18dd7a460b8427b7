// A standalone check of the kernels, the handlers' own path (run_forward and
// run_backward: the row-parallel loop and the huge-page advice) and the
// handlers' exception guard, outside XLA: each result is compared with a naive
// double-precision loop. Its point is to run under AddressSanitizer and
// UndefinedBehaviorSanitizer, which do not load cleanly into a Python
// process beside jaxlib (see README.md):
//
//   cmake -S . -B build/asan -DRMS_NORM_MODULE=OFF -DRMS_NORM_SANITIZE=ON
//         -DCMAKE_BUILD_TYPE=RelWithDebInfo
//   cmake --build build/asan --target kernel_check && build/asan/kernel_check
//
// (CMake finds the Python whose jax knows where the XLA FFI headers are: the
// active virtual environment's, or pass -DPython_EXECUTABLE=...)
//
// tests/test_kernel_check.py does this, in a build folder it keeps. Exit
// status 0 means every check passed; a sanitizer report aborts with a
// non-zero status. In a project with the CUDA handler (rms_norm_block.h
// present) it also runs the CUDA kernels' row arithmetic here, on the CPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <mutex>
#include <new>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "rms_norm_guard.h"
#include "rms_norm_kernels.h"
#include "rms_norm_parallel.h"
#include "rms_norm_run.h"
#if __has_include("rms_norm_block.h")
#include "rms_norm_block.h"
#define RMS_NORM_CHECK_CUDA_ROWS 1
#endif

using namespace rms_norm;

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "FAILED: %s\n", what.c_str());
  }
}

std::string shape(std::int64_t rows, std::int64_t n) {
  return " (rows=" + std::to_string(rows) + ", n=" + std::to_string(n) + ")";
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

// A pool that takes `accept` tasks and then throws, as std::thread does when
// the system has no thread left, or ffi::ThreadPool::Schedule when the
// allocation of its task fails.
class FailingPool {
 public:
  FailingPool(std::int64_t threads, int accept) : pool_(threads), accept_(accept) {}
  std::int64_t num_threads() const { return pool_.num_threads(); }
  template <typename F>
  void Schedule(F&& f) {
    if (accepted_ == accept_) {
      throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                              "no thread for this task");
    }
    ++accepted_;
    pool_.Schedule(std::forward<F>(f));
  }

 private:
  ThreadPerTask pool_;
  int accept_, accepted_ = 0;
};

// A pool of std::threads that calls `watch` each time it is asked for help,
// i.e. from inside parallel_rows, while the call is under way.
class WatchingPool {
 public:
  WatchingPool(std::int64_t threads, std::function<void()> watch)
      : pool_(threads), watch_(std::move(watch)) {}
  std::int64_t num_threads() const { return pool_.num_threads(); }
  template <typename F>
  void Schedule(F&& f) {
    watch_();
    pool_.Schedule(std::forward<F>(f));
  }

 private:
  ThreadPerTask pool_;
  std::function<void()> watch_;
};

const char* name(const float*) { return "float32"; }
const char* name(const double*) { return "float64"; }
const char* name(const BFloat16*) { return "bfloat16"; }

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

// Inputs and outputs of one check: rows x n elements of x (normal, times
// `scale`) and of the cotangent g (normal); y, dx and rinv start at zero.
template <typename T>
struct Rows {
  using R = typename Traits<T>::Residual;
  Rows(std::int64_t rows, std::int64_t n, double scale, std::mt19937& gen)
      : rows(rows), n(n), x(rows * n), g(rows * n), y(rows * n), dx(rows * n), rinv(rows) {
    std::normal_distribution<double> normal;
    for (auto& v : x) v = from_double<T>(scale * normal(gen));
    for (auto& v : g) v = from_double<T>(normal(gen));
  }
  std::int64_t rows, n;
  double eps = 1e-6;
  std::vector<T> x, g, y, dx;
  std::vector<R> rinv;
};

// 1 / rms of each row, in double from the stored x.
template <typename T>
std::vector<double> exact_rinv(const Rows<T>& c) {
  std::vector<double> r(c.rows);
  for (std::int64_t row = 0; row < c.rows; ++row) {
    double ss = 0;
    for (std::int64_t i = 0; i < c.n; ++i) {
      const double v = as_double(c.x[row * c.n + i]);
      ss += v * v;
    }
    r[row] = 1 / std::sqrt(ss / c.n + c.eps);
  }
  return r;
}

template <typename T>
void expect_forward(const Rows<T>& c, const std::string& what) {
  const double tol = tolerance(c.x.data());
  const std::vector<double> r = exact_rinv(c);
  bool y_ok = true, r_ok = true;
  for (std::int64_t row = 0; row < c.rows; ++row) {
    r_ok &= std::abs(static_cast<double>(c.rinv[row]) - r[row]) <= tol * r[row];
    double y_scale = 0;
    for (std::int64_t i = 0; i < c.n; ++i) {
      y_scale = std::max(y_scale, std::abs(as_double(c.x[row * c.n + i]) * r[row]));
    }
    for (std::int64_t i = 0; i < c.n; ++i) {
      const double want = as_double(c.x[row * c.n + i]) * r[row];
      y_ok &= std::abs(as_double(c.y[row * c.n + i]) - want) <= tol * (std::abs(want) + y_scale);
    }
  }
  const std::string label = what + " " + name(c.x.data());
  expect(r_ok, label + " rinv" + shape(c.rows, c.n));
  expect(y_ok, label + " forward" + shape(c.rows, c.n));
}

template <typename T>
void expect_backward(const Rows<T>& c, const std::string& what) {
  const double tol = tolerance(c.x.data());
  const std::vector<double> r = exact_rinv(c);
  bool ok = true;
  for (std::int64_t row = 0; row < c.rows; ++row) {
    double gx = 0;
    for (std::int64_t i = 0; i < c.n; ++i) {
      gx += as_double(c.g[row * c.n + i]) * as_double(c.x[row * c.n + i]);
    }
    std::vector<double> want(c.n);
    double scale = 0;
    for (std::int64_t i = 0; i < c.n; ++i) {
      const double term1 = r[row] * as_double(c.g[row * c.n + i]);
      const double term2 = r[row] * r[row] * r[row] * gx / c.n * as_double(c.x[row * c.n + i]);
      want[i] = term1 - term2;
      // The two terms cancel when g is nearly parallel to x (always, for
      // n = 1): the error is relative to the terms, not to their difference.
      scale = std::max(scale, std::abs(term1) + std::abs(term2));
    }
    for (std::int64_t i = 0; i < c.n; ++i) {
      ok &= std::abs(as_double(c.dx[row * c.n + i]) - want[i]) <=
            10 * tol * (std::abs(want[i]) + scale);
    }
  }
  expect(ok, what + " " + name(c.x.data()) + " backward" + shape(c.rows, c.n));
}

// The CPU kernels, through parallel_rows on `pool`.
template <typename T, typename Pool>
void run_cpu(Rows<T>& c, Pool& pool, bool backward_too) {
  parallel_rows(pool, c.rows, c.n, [&](std::int64_t b, std::int64_t e) {
    forward(c.x.data(), c.y.data(), c.rinv.data(), b, e, c.n, c.eps);
  });
  if (!backward_too) return;
  parallel_rows(pool, c.rows, c.n, [&](std::int64_t b, std::int64_t e) {
    backward(c.x.data(), c.rinv.data(), c.g.data(), c.dx.data(), b, e, c.n);
  });
}

template <typename T>
void check_cpu(std::int64_t rows, std::int64_t n, std::int64_t threads, std::mt19937& gen) {
  Rows<T> c(rows, n, 1.0, gen);
  {
    ThreadPerTask pool(threads);
    run_cpu(c, pool, true);
  }
  expect_forward(c, "cpu");
  expect_backward(c, "cpu");
}

// Rows whose squares overflow float32 (|x| ~ 1e20): right only if the sums
// accumulate in double.
template <typename T>
void check_cpu_overflow(std::int64_t rows, std::int64_t n, std::mt19937& gen) {
  Rows<T> c(rows, n, 1e20, gen);
  {
    ThreadPerTask pool(3);
    run_cpu(c, pool, false);
  }
  expect_forward(c, "cpu, |x| ~ 1e20,");
}

// A pool that refuses tasks must not lose rows or let an exception out.
void check_refusing_pool(std::mt19937& gen) {
  for (int accept : {0, 1}) {
    Rows<float> c(300, 4099, 1.0, gen);  // enough rows for 2 helpers of 3 workers
    bool threw = false;
    try {
      FailingPool pool(3, accept);
      run_cpu(c, pool, true);
    } catch (...) {
      threw = true;
    }
    const std::string label = "pool refusing tasks after " + std::to_string(accept) + ":";
    expect(!threw, label + " parallel_rows threw");
    expect_forward(c, label);
    expect_backward(c, label);
  }
}

#if defined(__linux__)
// The flags the kernel keeps for the mapping that holds `address`, from
// /proc/self/smaps ("hg": advised MADV_HUGEPAGE, "nh": MADV_NOHUGEPAGE).
std::set<std::string> mapping_flags(const void* address) {
  const auto a = reinterpret_cast<std::uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long begin, end;  // a mapping's first line starts "begin-end " in hex
    if (std::sscanf(line.c_str(), "%lx-%lx ", &begin, &end) == 2) inside = begin <= a && a < end;
    if (inside && line.rfind("VmFlags:", 0) == 0) {
      std::istringstream words(line.substr(8));
      return {std::istream_iterator<std::string>(words), std::istream_iterator<std::string>()};
    }
  }
  return {};
}

// The handlers' own path, run_forward and run_backward, on outputs above
// kHugeBytes: where huge pages come on request the output is advised while
// the call runs (seen from the pool, which is asked for help mid-call), and
// no advice is left when it returns: madvise marks the addresses, so the
// advice would otherwise outlive the output.
void check_huge_page_advice(std::mt19937& gen) {
  Rows<float> c(300, 4099, 1.0, gen);  // outputs of 4.7 MiB: one whole 2 MiB block at least
  static_assert(300 * 4099 * sizeof(float) >= kHugeBytes);
  const bool on_request = huge_pages_on_request();
  for (const bool backward_pass : {false, true}) {
    const float* out = backward_pass ? c.dx.data() : c.y.data();
    const float* middle = out + c.x.size() / 2;  // inside the advised blocks
    const std::string label = backward_pass ? "run_backward" : "run_forward";
    bool advised_during = false;
    {
      WatchingPool pool(3, [&] { advised_during |= mapping_flags(middle).count("hg") > 0; });
      if (backward_pass) {
        run_backward(pool, c.x.data(), c.rinv.data(), c.g.data(), c.dx.data(), c.rows, c.n);
      } else {
        run_forward(pool, c.x.data(), c.y.data(), c.rinv.data(), c.rows, c.n, c.eps);
      }
      expect(mapping_flags(middle).count("hg") == 0,
             label + ": the huge-page advice outlives the call");
    }
    expect(advised_during == on_request,
           label + (on_request ? ": no huge-page advice during the call"
                               : ": huge pages advised though the kernel does not want it"));
  }
  expect_forward(c, "run_forward");
  expect_backward(c, "run_backward");
}
#endif

// guarded() turns every exception into the error it documents, and passes
// the body's own result through.
void check_guard() {
  using ffi::ErrorCode;
  auto expect_error = [](const ffi::Error& error, ErrorCode code, const std::string& message) {
    expect(error.errc() == code && error.message() == message, "guarded: \"" + message + "\"");
  };
  expect_error(guarded("op", []() -> ffi::Error { throw std::bad_alloc(); }),
               ErrorCode::kResourceExhausted, "op: out of memory");
  expect_error(guarded("op", []() -> ffi::Error { throw std::runtime_error("boom"); }),
               ErrorCode::kInternal, "op: boom");
  expect_error(guarded("op", []() -> ffi::Error { throw 42; }), ErrorCode::kInternal,
               "op: unknown C++ exception");
  expect_error(guarded("op", [] { return ffi::Error::InvalidArgument("op: bad x"); }),
               ErrorCode::kInvalidArgument, "op: bad x");
  expect(guarded("op", [] { return ffi::Error::Success(); }).success(), "guarded: success");
}

#ifdef RMS_NORM_CHECK_CUDA_ROWS
// The CUDA kernels' arithmetic, run on the CPU: rms_norm_cuda.cu gives each
// row a block of kBlockThreads threads; here each thread's share is computed
// in turn and the shares' sums are added up as block_sum does on the GPU.
template <typename T>
void run_cuda_rows(Rows<T>& c, bool backward_too) {
  using Tr = Traits<T>;
  for (std::int64_t row = 0; row < c.rows; ++row) {
    const T* x = c.x.data() + row * c.n;
    const T* g = c.g.data() + row * c.n;
    Accumulator sum_xx = 0, sum_gx = 0;
    for (int t = 0; t < kBlockThreads; ++t) {
      sum_xx += strided_dot<Tr>(x, x, c.n, t, kBlockThreads);
      sum_gx += strided_dot<Tr>(g, x, c.n, t, kBlockThreads);
    }
    const double r = inverse_rms(sum_xx, c.n, c.eps);
    c.rinv[row] = static_cast<typename Rows<T>::R>(r);
    const double r_stored = static_cast<double>(c.rinv[row]);  // what the backward reads
    const double coefficient = backward_coefficient(r_stored, sum_gx, c.n);
    for (int t = 0; t < kBlockThreads; ++t) {
      forward_share<Tr>(x, c.y.data() + row * c.n, c.n, t, kBlockThreads, r);
      if (backward_too) {
        backward_share<Tr>(x, g, c.dx.data() + row * c.n, c.n, t, kBlockThreads, r_stored,
                           coefficient);
      }
    }
  }
}

template <typename T>
void check_cuda_rows(std::int64_t rows, std::int64_t n, std::mt19937& gen) {
  Rows<T> c(rows, n, 1.0, gen);
  run_cuda_rows(c, true);
  expect_forward(c, "cuda rows");
  expect_backward(c, "cuda rows");
  Rows<T> huge(rows, n, 1e20, gen);
  run_cuda_rows(huge, false);
  expect_forward(huge, "cuda rows, |x| ~ 1e20,");
}
#endif

void check_bfloat16_rounding() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  expect(to_float(to_bfloat16(1.0f)) == 1.0f, "bfloat16 round trip");
  // 1 + 2^-8 lies halfway between two bfloat16 values: ties go to even (1.0).
  expect(to_float(to_bfloat16(1.0f + 1.0f / 256)) == 1.0f, "bfloat16 ties to even");
  expect(to_float(to_bfloat16(1.0f + 3.0f / 512)) == 1.0f + 1.0f / 128, "bfloat16 rounds up");
  expect(std::isnan(to_float(to_bfloat16(nan))), "bfloat16 keeps NaN");
  expect(std::isinf(to_float(to_bfloat16(std::numeric_limits<float>::infinity()))),
         "bfloat16 keeps inf");
}

}  // namespace

int main() {
  std::mt19937 gen(1234);
  check_bfloat16_rounding();
  check_guard();
  check_refusing_pool(gen);
#if defined(__linux__)
  check_huge_page_advice(gen);
#endif
  // Row lengths around the vector block (kLanes = 16) and odd tails; row
  // counts that give one chunk, several, and a ragged last chunk.
  for (std::int64_t n : {1, 3, 15, 16, 17, 100, 4099}) {
    for (std::int64_t rows : {1, 7, 300}) {
      for (std::int64_t threads : {0, 1, 3}) {
        check_cpu<float>(rows, n, threads, gen);
        check_cpu<double>(rows, n, threads, gen);
        check_cpu<BFloat16>(rows, n, threads, gen);
      }
    }
    check_cpu_overflow<float>(7, n, gen);
    check_cpu_overflow<BFloat16>(7, n, gen);
  }
#ifdef RMS_NORM_CHECK_CUDA_ROWS
  // Row lengths below, at and above one element per thread, and long rows.
  for (std::int64_t n : {1, 3, 255, 256, 257, 1000, 4099}) {
    check_cuda_rows<float>(7, n, gen);
    check_cuda_rows<double>(7, n, gen);
    check_cuda_rows<BFloat16>(7, n, gen);
  }
  std::printf("kernel_check: checked the CUDA kernels' row arithmetic on the CPU\n");
#endif
  if (failures) {
    std::fprintf(stderr, "kernel_check: %d checks FAILED\n", failures);
    return 1;
  }
  std::printf("kernel_check: all checks passed\n");
  return 0;
}
