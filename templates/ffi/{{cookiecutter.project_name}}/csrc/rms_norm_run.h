// What the CPU handlers do once their arguments passed the checks: rows
// split over the pool, each chunk's output pre-faulted and then computed,
// with huge pages for the output during the call (rms_norm_parallel.h).
//
// Templated on the pool, like parallel_rows: rms_norm_cpu.cc passes XLA's
// ffi::ThreadPool, kernel_check.cc a pool of std::threads, so the handlers'
// own path runs under the sanitizers outside XLA.
#pragma once

#include <cstdint>

#include "rms_norm_kernels.h"
#include "rms_norm_parallel.h"

namespace rms_norm {

template <typename T, typename Pool>
void run_forward(Pool& pool, const T* x, T* y, typename Traits<T>::Residual* rinv,
                 std::int64_t rows, std::int64_t cols, double eps) {
  const HugePagesDuringCall huge_pages(y, rows * cols * sizeof(T));
  parallel_rows(pool, rows, cols, [=](std::int64_t begin, std::int64_t end) {
    prefault_for_writing(y + begin * cols, (end - begin) * cols * sizeof(T));
    forward(x, y, rinv, begin, end, cols, eps);
  });
}

template <typename T, typename Pool>
void run_backward(Pool& pool, const T* x, const typename Traits<T>::Residual* rinv, const T* ct,
                  T* dx, std::int64_t rows, std::int64_t cols) {
  const HugePagesDuringCall huge_pages(dx, rows * cols * sizeof(T));
  parallel_rows(pool, rows, cols, [=](std::int64_t begin, std::int64_t end) {
    prefault_for_writing(dx + begin * cols, (end - begin) * cols * sizeof(T));
    backward(x, rinv, ct, dx, begin, end, cols);
  });
}

}  // namespace rms_norm
