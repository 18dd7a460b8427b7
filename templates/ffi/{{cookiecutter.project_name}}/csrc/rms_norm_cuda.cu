// XLA FFI handlers for RMS normalisation on NVIDIA GPUs: the same op, the
// same argument checks (rms_norm_checks.h) and the same residual as the CPU
// handlers, so jax.custom_vjp in rms_norm.py pairs them the same way.
//
// One thread block per row (grid-stride over rows): each thread sums its
// share of the row in double, the block adds the shares with warp shuffles,
// then each thread scales its share (rms_norm_block.h, with the row
// arithmetic of rms_norm_row.h that the CPU kernels use too, so both
// accumulate in double and kernel_check.cc tests this arithmetic on the CPU).
// Launches are asynchronous on XLA's stream; the handler reports launch
// errors only.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "rms_norm_block.h"
#include "rms_norm_checks.h"
#include "rms_norm_guard.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace rms_norm {
namespace {

constexpr std::int64_t kMaxBlocks = 1 << 16;  // blocks loop over rows beyond this

// Storage type -> compute type and conversions, for rms_norm_block.h.
template <typename T>
struct Device;

template <>
struct Device<float> {
  using Compute = float;
  __host__ __device__ static float load(float v) { return v; }
  __host__ __device__ static float store(float v) { return v; }
};

template <>
struct Device<double> {
  using Compute = double;
  __host__ __device__ static double load(double v) { return v; }
  __host__ __device__ static double store(double v) { return v; }
};

template <>
struct Device<__nv_bfloat16> {
  using Compute = float;
  __host__ __device__ static float load(__nv_bfloat16 v) { return __bfloat162float(v); }
  __host__ __device__ static __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
};

// Sum of `value` over the block; every thread gets the result. `scratch`
// holds one value per warp.
__device__ Accumulator block_sum(Accumulator value, Accumulator* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) {
    value += __shfl_down_sync(0xffffffffu, value, offset);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  Accumulator total = 0;
  for (int w = 0; w < kBlockThreads / 32; ++w) total += scratch[w];
  __syncthreads();  // scratch is reused by the next row
  return total;
}

template <typename T, typename R>
__global__ void forward_kernel(const T* __restrict__ x, T* __restrict__ y, R* __restrict__ rinv,
                               std::int64_t rows, std::int64_t n, double eps) {
  using D = Device<T>;
  __shared__ Accumulator scratch[kBlockThreads / 32];
  const std::int64_t first = threadIdx.x;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * n;
    const Accumulator sum = block_sum(strided_dot<D>(xr, xr, n, first, kBlockThreads), scratch);
    const double r = inverse_rms(sum, n, eps);
    forward_share<D>(xr, y + row * n, n, first, kBlockThreads, r);
    if (first == 0) rinv[row] = static_cast<R>(r);
  }
}

template <typename T, typename R>
__global__ void backward_kernel(const T* __restrict__ x, const R* __restrict__ rinv,
                                const T* __restrict__ g, T* __restrict__ dx, std::int64_t rows,
                                std::int64_t n) {
  using D = Device<T>;
  __shared__ Accumulator scratch[kBlockThreads / 32];
  const std::int64_t first = threadIdx.x;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * n;
    const T* gr = g + row * n;
    const Accumulator sum_gx = block_sum(strided_dot<D>(gr, xr, n, first, kBlockThreads), scratch);
    const double r = static_cast<double>(rinv[row]);
    const double c = backward_coefficient(r, sum_gx, n);
    backward_share<D>(xr, gr, dx + row * n, n, first, kBlockThreads, r, c);
  }
}

int blocks_for(std::int64_t rows) {
  return static_cast<int>(std::min<std::int64_t>(rows, kMaxBlocks));
}

// Launches a kernel and reports whether the launch failed (a bad
// configuration, no kernel image for this GPU). Launch errors arrive through
// the runtime's per-thread "last error", which any earlier failed runtime
// call on this thread may have set too and which stays set until someone
// reads it with cudaGetLastError. So: clear a stale error first (it is not
// this launch's to report), launch, then read and clear the launch's own.
// A sticky error (a broken context) cannot be cleared: then the launch fails
// too and is reported as it should be.
template <typename Launch>
ffi::Error launch_checked(const char* op, Launch launch) {
  (void)cudaGetLastError();
  launch();
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) {
    return ffi::Error::Internal(std::string(op) + ": CUDA launch failed: " +
                                cudaGetErrorString(status));
  }
  return ffi::Error::Success();
}

template <typename T, typename R>
ffi::Error launch_forward(cudaStream_t stream, const ffi::AnyBuffer& x, ffi::AnyBuffer& y,
                          ffi::AnyBuffer& rinv, Geometry g, double eps) {
  return launch_checked("rms_norm_fwd", [&] {
    forward_kernel<T, R><<<blocks_for(g.rows), kBlockThreads, 0, stream>>>(
        static_cast<const T*>(x.untyped_data()), static_cast<T*>(y.untyped_data()),
        static_cast<R*>(rinv.untyped_data()), g.rows, g.cols, eps);
  });
}

template <typename T, typename R>
ffi::Error launch_backward(cudaStream_t stream, const ffi::AnyBuffer& x,
                           const ffi::AnyBuffer& rinv, const ffi::AnyBuffer& ct,
                           ffi::AnyBuffer& dx, Geometry g) {
  return launch_checked("rms_norm_bwd", [&] {
    backward_kernel<T, R><<<blocks_for(g.rows), kBlockThreads, 0, stream>>>(
        static_cast<const T*>(x.untyped_data()), static_cast<const R*>(rinv.untyped_data()),
        static_cast<const T*>(ct.untyped_data()), static_cast<T*>(dx.untyped_data()), g.rows,
        g.cols);
  });
}

ffi::Error Forward(cudaStream_t stream, const ffi::AnyBuffer& x, ffi::AnyBuffer& y,
                   ffi::AnyBuffer& rinv, double eps) {
  Geometry g;
  if (auto error = check_forward(x, y, rinv, eps, g)) return *error;
  if (g.rows == 0) return ffi::Error::Success();
  switch (x.element_type()) {
    case ffi::DataType::F32: return launch_forward<float, float>(stream, x, y, rinv, g, eps);
    case ffi::DataType::F64: return launch_forward<double, double>(stream, x, y, rinv, g, eps);
    case ffi::DataType::BF16:
      return launch_forward<__nv_bfloat16, float>(stream, x, y, rinv, g, eps);
    default: return ffi::Error::Internal("rms_norm_fwd: dtype passed the checks but has no kernel");
  }
}

ffi::Error Backward(cudaStream_t stream, const ffi::AnyBuffer& x, const ffi::AnyBuffer& rinv,
                    const ffi::AnyBuffer& ct, ffi::AnyBuffer& dx) {
  Geometry g;
  if (auto error = check_backward(x, rinv, ct, dx, g)) return *error;
  if (g.rows == 0) return ffi::Error::Success();
  switch (x.element_type()) {
    case ffi::DataType::F32: return launch_backward<float, float>(stream, x, rinv, ct, dx, g);
    case ffi::DataType::F64: return launch_backward<double, double>(stream, x, rinv, ct, dx, g);
    case ffi::DataType::BF16:
      return launch_backward<__nv_bfloat16, float>(stream, x, rinv, ct, dx, g);
    default: return ffi::Error::Internal("rms_norm_bwd: dtype passed the checks but has no kernel");
  }
}

// The functions XLA calls: each runs its body through guarded(), so no C++
// exception reaches XLA (see rms_norm_guard.h).
ffi::Error ForwardImpl(cudaStream_t stream, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y,
                       ffi::Result<ffi::AnyBuffer> rinv, double eps) {
  return guarded("rms_norm_fwd", [&] { return Forward(stream, x, *y, *rinv, eps); });
}

ffi::Error BackwardImpl(cudaStream_t stream, ffi::AnyBuffer x, ffi::AnyBuffer rinv,
                        ffi::AnyBuffer ct, ffi::Result<ffi::AnyBuffer> dx) {
  return guarded("rms_norm_bwd", [&] { return Backward(stream, x, rinv, ct, *dx); });
}

}  // namespace
}  // namespace rms_norm

// Kernel launches on XLA's stream are safe to capture in CUDA graphs, hence
// kCmdBufferCompatible.
XLA_FFI_DEFINE_HANDLER_SYMBOL(RmsNormForwardCuda, rms_norm::ForwardImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::AnyBuffer>()  // x
                                  .Ret<ffi::AnyBuffer>()  // y
                                  .Ret<ffi::AnyBuffer>()  // rinv = 1 / rms, per row
                                  .Attr<double>("eps"),
                              {ffi::Traits::kCmdBufferCompatible});

XLA_FFI_DEFINE_HANDLER_SYMBOL(RmsNormBackwardCuda, rms_norm::BackwardImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::AnyBuffer>()   // x
                                  .Arg<ffi::AnyBuffer>()   // rinv from the forward
                                  .Arg<ffi::AnyBuffer>()   // cotangent of y
                                  .Ret<ffi::AnyBuffer>(),  // dx
                              {ffi::Traits::kCmdBufferCompatible});
