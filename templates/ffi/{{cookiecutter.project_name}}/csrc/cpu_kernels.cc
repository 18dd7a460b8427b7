// The CPU kernels' entry points, compiled once per instruction set.
//
// target_clones makes GCC and Clang emit one copy per listed target plus a
// resolver that picks the best for the running CPU when the module loads
// (a GNU ifunc). The binary stays portable, unlike -march=native. Elsewhere
// (other architectures, non-glibc systems, other compilers) the plain -O3
// build runs: SSE2 on x86-64, NEON on aarch64.
//
// The middle copy is x86-64-v3 (AVX2 with FMA), not "avx2" alone: a kernel's
// explicit fma (std::fma) is then one instruction there, as in the AVX-512
// copy, and a call to the C library's exact fma only in the baseline copy.
#include "cpu_rows.h"

#if defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__) && defined(__GNUC__) && \
    !defined(ROWWISE_NO_CLONES)
#define ROWWISE_CLONES __attribute__((target_clones("avx512f", "arch=x86-64-v3", "default")))
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
