// The kernels' entry points, compiled once per instruction set.
//
// target_clones makes GCC and Clang emit one copy per listed target plus a
// resolver that picks the best for the running CPU when the module loads
// (a GNU ifunc). The binary stays portable, unlike -march=native. Elsewhere
// (other architectures, non-glibc systems, other compilers) the plain -O3
// build runs: SSE2 on x86-64, NEON on aarch64.
#include "rms_norm_kernels.h"

#if defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__) && defined(__GNUC__) && \
    !defined(RMS_NORM_NO_CLONES)
#define RMS_NORM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define RMS_NORM_CLONES
#endif

namespace rms_norm {

#define RMS_NORM_DEFINE(T)                                                                  \
  RMS_NORM_CLONES void forward(const T* x, T* y, Traits<T>::Residual* rinv,               \
                               std::int64_t begin, std::int64_t end, std::int64_t n,       \
                               double eps) {                                               \
    forward_rows<T>(x, y, rinv, begin, end, n, eps);                                       \
  }                                                                                         \
  RMS_NORM_CLONES void backward(const T* x, const Traits<T>::Residual* rinv, const T* g,  \
                                T* dx, std::int64_t begin, std::int64_t end,               \
                                std::int64_t n) {                                          \
    backward_rows<T>(x, rinv, g, dx, begin, end, n);                                       \
  }
RMS_NORM_DEFINE(float)
RMS_NORM_DEFINE(double)
RMS_NORM_DEFINE(BFloat16)
#undef RMS_NORM_DEFINE

}  // namespace rms_norm
