// The CPU kernels' entry points, compiled once per instruction set.
//
// target_clones makes GCC and Clang emit one copy per listed target plus a
// resolver that picks the best for the running CPU when the module loads
// (a GNU ifunc). The binary stays portable, unlike -march=native. Elsewhere
// (other architectures, non-glibc systems, other compilers) the plain -O3
// build runs: SSE2 on x86-64, NEON on aarch64.
#include "cpu_rows.h"

#if defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__) && defined(__GNUC__) && \
    !defined(ROWWISE_NO_CLONES)
#define ROWWISE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ROWWISE_CLONES
#endif

namespace rowwise {

#define ROWWISE_DEFINE(T)                                                                   \
  ROWWISE_CLONES void forward(const T* x, T* y, Traits<T>::Residual* residual,             \
                              std::int64_t begin, std::int64_t end, std::int64_t n,         \
                              const op::Attributes& attributes) {                           \
    forward_rows<T>(x, y, residual, begin, end, n, attributes);                             \
  }                                                                                         \
  ROWWISE_CLONES void backward(const T* x, const Traits<T>::Residual* residual, const T* g, \
                               T* dx, std::int64_t begin, std::int64_t end, std::int64_t n, \
                               const op::Attributes& attributes) {                          \
    backward_rows<T>(x, residual, g, dx, begin, end, n, attributes);                        \
  }
ROWWISE_DEFINE(float)
ROWWISE_DEFINE(double)
ROWWISE_DEFINE(BFloat16)
#undef ROWWISE_DEFINE

}  // namespace rowwise
