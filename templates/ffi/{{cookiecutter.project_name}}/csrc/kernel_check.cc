// A standalone check of the machinery around the op's rows, outside XLA:
// the CPU kernels (CpuRow's vectorised sums), the handlers' own path
// (run_forward and run_backward: the row-parallel loop and, where
// huge_pages.h exists, the huge-page advice), the loop with a pool that
// refuses tasks, the handlers' exception guard and, in a project with the
// CUDA handler (cuda_block.h present), the CUDA kernels' way of running a
// row, compiled for the CPU. Each result is compared with the op's own
// forward_row and backward_row (csrc/<op>_kernels.h) run by a direct row
// loop, so the checks hold for any op; whether the op's formulas are right
// is for the Python tests, against the reference. Its point is to run
// under AddressSanitizer and UndefinedBehaviorSanitizer, which do not load
// cleanly into a Python process beside jaxlib (see README.md):
//
//   cmake -S . -B build/asan -DFFI_MODULE=OFF -DFFI_SANITIZE=ON
//         -DCMAKE_BUILD_TYPE=RelWithDebInfo
//   cmake --build build/asan --target kernel_check && build/asan/kernel_check
//
// (CMake finds the Python whose jax knows where the XLA FFI headers are: the
// active virtual environment's, or pass -DPython_EXECUTABLE=...)
//
// tests/test_kernel_check.py does this, in a build folder it keeps. Exit
// status 0 means every check passed; a sanitizer report aborts with a
// non-zero status.
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

#include "cpu_rows.h"
#include "guard.h"
#include "op.h"
#include "parallel.h"
#include "run.h"
#if __has_include("cuda_block.h")
#include "cuda_block.h"
#define ROWWISE_CHECK_CUDA_ROWS 1
#endif
#if __has_include("huge_pages.h") && defined(__linux__)
#define ROWWISE_CHECK_HUGE_PAGES 1
#endif

using namespace rowwise;

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

// Relative to the row's largest output: the paths differ only in the order
// of their double sums, and in what that does to the final roundings.
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

// The direct row loop: the Row of rowwise.h at its plainest, one sum in
// index order. What every path below is compared with.
template <typename T>
struct DirectRow {
  using Compute = typename Traits<T>::Compute;
  std::int64_t n;
  static Compute load(T v) { return Traits<T>::load(v); }
  static T store(Compute v) { return Traits<T>::store(v); }
  template <typename F>
  Accumulator sum(F&& f) const {
    Accumulator total = 0;
    for (std::int64_t i = 0; i < n; ++i) total += f(i);
    return total;
  }
  template <typename F>
  Accumulator max(F&& f) const {
    Accumulator best = f(0);
    for (std::int64_t i = 1; i < n; ++i) best = std::max<Accumulator>(best, f(i));
    return best;
  }
  template <typename F>
  void each(F&& f) const {
    for (std::int64_t i = 0; i < n; ++i) f(i);
  }
};

// Inputs and outputs of one check: rows x n elements of x (normal, times
// `scale`) and of the cotangent g (normal); y, dx and the residual start at
// zero.
template <typename T>
struct Rows {
  using R = typename Traits<T>::Residual;
  Rows(std::int64_t rows, std::int64_t n, double scale, std::mt19937& gen)
      : rows(rows), n(n), x(rows * n), g(rows * n), y(rows * n), dx(rows * n), residual(rows) {
    std::normal_distribution<double> normal;
    for (auto& v : x) v = from_double<T>(scale * normal(gen));
    for (auto& v : g) v = from_double<T>(normal(gen));
  }
  std::int64_t rows, n;
  op::Attributes attributes;  // the kernel file's valid values
  std::vector<T> x, g, y, dx;
  std::vector<R> residual;
};

// a and b agree within tol of each row's largest |b|.
template <typename V>
bool rows_agree(const std::vector<V>& a, const std::vector<V>& b, std::int64_t rows,
                std::int64_t n, double tol) {
  bool ok = true;
  for (std::int64_t row = 0; row < rows; ++row) {
    double scale = 0;
    for (std::int64_t i = 0; i < n; ++i) scale = std::max(scale, std::abs(as_double(b[row * n + i])));
    for (std::int64_t i = 0; i < n; ++i) {
      const double got = as_double(a[row * n + i]), want = as_double(b[row * n + i]);
      ok &= std::isnan(want) ? std::isnan(got) : std::abs(got - want) <= tol * (std::abs(want) + scale);
    }
  }
  return ok;
}

// c's outputs against the direct row loop on the same inputs: y and the
// residual, and (backward_too) dx from c's own residual.
template <typename T>
void expect_direct(const Rows<T>& c, const std::string& what, bool backward_too) {
  Rows<T> want = c;
  const DirectRow<T> row{c.n};
  for (std::int64_t r = 0; r < c.rows; ++r) {
    want.residual[r] = static_cast<typename Rows<T>::R>(
        op::forward_row(row, c.x.data() + r * c.n, want.y.data() + r * c.n, c.attributes));
    op::backward_row(row, c.x.data() + r * c.n, static_cast<double>(c.residual[r]),
                     c.g.data() + r * c.n, want.dx.data() + r * c.n, c.attributes);
  }
  const double tol = tolerance(c.x.data());
  const std::string label = what + " " + name(c.x.data());
  expect(rows_agree(c.residual, want.residual, c.rows, 1, tol), label + " residual" + shape(c.rows, c.n));
  expect(rows_agree(c.y, want.y, c.rows, c.n, tol), label + " forward" + shape(c.rows, c.n));
  if (backward_too) {
    expect(rows_agree(c.dx, want.dx, c.rows, c.n, tol), label + " backward" + shape(c.rows, c.n));
  }
}

// The CPU kernels, through parallel_rows on `pool`.
template <typename T, typename Pool>
void run_cpu(Rows<T>& c, Pool& pool, bool backward_too) {
  parallel_rows(pool, c.rows, c.n, [&](std::int64_t b, std::int64_t e) {
    forward(c.x.data(), c.y.data(), c.residual.data(), b, e, c.n, c.attributes);
  });
  if (!backward_too) return;
  parallel_rows(pool, c.rows, c.n, [&](std::int64_t b, std::int64_t e) {
    backward(c.x.data(), c.residual.data(), c.g.data(), c.dx.data(), b, e, c.n, c.attributes);
  });
}

template <typename T>
void check_cpu(std::int64_t rows, std::int64_t n, std::int64_t threads, std::mt19937& gen) {
  Rows<T> c(rows, n, 1.0, gen);
  {
    ThreadPerTask pool(threads);
    run_cpu(c, pool, true);
  }
  expect_direct(c, "cpu", true);
}

// Rows whose squares overflow float32 (|x| ~ 1e20): the sums must
// accumulate in double, as the direct loop's do.
template <typename T>
void check_cpu_overflow(std::int64_t rows, std::int64_t n, std::mt19937& gen) {
  Rows<T> c(rows, n, 1e20, gen);
  {
    ThreadPerTask pool(3);
    run_cpu(c, pool, false);
  }
  expect_direct(c, "cpu, |x| ~ 1e20,", false);
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
    expect_direct(c, label, true);
  }
}

#ifdef ROWWISE_CHECK_HUGE_PAGES
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
        run_backward(pool, c.x.data(), c.residual.data(), c.g.data(), c.dx.data(), c.rows, c.n,
                     c.attributes);
      } else {
        run_forward(pool, c.x.data(), c.y.data(), c.residual.data(), c.rows, c.n, c.attributes);
      }
      expect(mapping_flags(middle).count("hg") == 0,
             label + ": the huge-page advice outlives the call");
    }
    expect(advised_during == on_request,
           label + (on_request ? ": no huge-page advice during the call"
                               : ": huge pages advised though the kernel does not want it"));
  }
  expect_direct(c, "run_forward and run_backward", true);
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

#ifdef ROWWISE_CHECK_CUDA_ROWS
// The Block of BlockRow (cuda_block.h) on the CPU: every thread's share in
// turn, added up as GpuBlock in cuda_handlers.cu does on the GPU.
struct SerialBlock {
  template <typename Share>
  Accumulator sum(const Share& share, std::int64_t) const {
    Accumulator total = 0;
    for (int t = 0; t < kBlockThreads; ++t) total += share(t);
    return total;
  }
  template <typename Share>
  Accumulator max(const Share& share, std::int64_t) const {
    Accumulator best = share(0);
    for (int t = 1; t < kBlockThreads; ++t) best = std::max<Accumulator>(best, share(t));
    return best;
  }
};

// The CUDA kernels' rows, run on the CPU: cuda_handlers.cu gives each row a
// block of kBlockThreads threads; here each thread runs in turn, writing its
// share of the outputs (thread 0 the residual).
template <typename T>
void run_cuda_rows(Rows<T>& c, bool backward_too) {
  for (std::int64_t r = 0; r < c.rows; ++r) {
    for (int t = 0; t < kBlockThreads; ++t) {
      const BlockRow<Traits<T>, SerialBlock> row{c.n, t, SerialBlock{}};
      const double value =
          op::forward_row(row, c.x.data() + r * c.n, c.y.data() + r * c.n, c.attributes);
      if (t == 0) c.residual[r] = static_cast<typename Rows<T>::R>(value);
    }
    if (!backward_too) continue;
    for (int t = 0; t < kBlockThreads; ++t) {
      const BlockRow<Traits<T>, SerialBlock> row{c.n, t, SerialBlock{}};
      op::backward_row(row, c.x.data() + r * c.n, static_cast<double>(c.residual[r]),
                       c.g.data() + r * c.n, c.dx.data() + r * c.n, c.attributes);
    }
  }
}

template <typename T>
void check_cuda_rows(std::int64_t rows, std::int64_t n, std::mt19937& gen) {
  Rows<T> c(rows, n, 1.0, gen);
  run_cuda_rows(c, true);
  expect_direct(c, "cuda rows", true);
  Rows<T> huge(rows, n, 1e20, gen);
  run_cuda_rows(huge, false);
  expect_direct(huge, "cuda rows, |x| ~ 1e20,", false);
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
#ifdef ROWWISE_CHECK_HUGE_PAGES
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
#ifdef ROWWISE_CHECK_CUDA_ROWS
  // Row lengths below, at and above one element per thread, and long rows.
  for (std::int64_t n : {1, 3, 255, 256, 257, 1000, 4099}) {
    check_cuda_rows<float>(7, n, gen);
    check_cuda_rows<double>(7, n, gen);
    check_cuda_rows<BFloat16>(7, n, gen);
  }
  std::printf("kernel_check: checked the CUDA kernels' rows on the CPU\n");
#endif
#ifdef ROWWISE_CHECK_HUGE_PAGES
  std::printf("kernel_check: checked the huge-page advice\n");
#endif
  if (failures) {
    std::fprintf(stderr, "kernel_check: %d checks FAILED\n", failures);
    return 1;
  }
  std::printf("kernel_check: all checks passed (op %s)\n", OP_NAME);
  return 0;
}
