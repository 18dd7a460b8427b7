// What the CPU handlers do once their arguments passed the checks: rows
// split over the pool (parallel.h), each chunk's output pre-faulted and then
// computed, with huge pages for the output during the call (huge_pages.h,
// optional: without it, outputs take ordinary page faults).
//
// Templated on the pool, like parallel_rows: cpu_handlers.cc passes XLA's
// ffi::ThreadPool, kernel_check.cc a pool of std::threads, so the handlers'
// own path runs under the sanitizers outside XLA.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cpu_rows.h"
#include "parallel.h"
#if __has_include("huge_pages.h")
#include "huge_pages.h"
#else
namespace rowwise {
struct HugePagesDuringCall {
  HugePagesDuringCall(void*, std::size_t) {}
};
inline void prefault_for_writing(void*, std::size_t) {}
}  // namespace rowwise
#endif

namespace rowwise {

template <typename T, typename Pool>
void run_forward(Pool& pool, const T* x, T* y, typename Traits<T>::Residual* residual,
                 std::int64_t rows, std::int64_t cols, const op::Attributes& attributes) {
  const HugePagesDuringCall huge_pages(y, rows * cols * sizeof(T));
  parallel_rows(pool, rows, cols, [=](std::int64_t begin, std::int64_t end) {
    prefault_for_writing(y + begin * cols, (end - begin) * cols * sizeof(T));
    forward(x, y, residual, begin, end, cols, attributes);
  });
}

template <typename T, typename Pool>
void run_backward(Pool& pool, const T* x, const typename Traits<T>::Residual* residual,
                  const T* ct, T* dx, std::int64_t rows, std::int64_t cols,
                  const op::Attributes& attributes) {
  const HugePagesDuringCall huge_pages(dx, rows * cols * sizeof(T));
  parallel_rows(pool, rows, cols, [=](std::int64_t begin, std::int64_t end) {
    prefault_for_writing(dx + begin * cols, (end - begin) * cols * sizeof(T));
    backward(x, residual, ct, dx, begin, end, cols, attributes);
  });
}

}  // namespace rowwise
