// XLA FFI handlers for RMS normalisation on NVIDIA GPUs: the same op, the
// same argument checks (rms_norm_checks.h) and the same residual as the CPU
// handlers, so jax.custom_vjp in rms_norm.py pairs them the same way.
//
// One thread block per row (grid-stride over rows): the block sums the row's
// squares with warp shuffles, then scales the row. float32 and bfloat16
// accumulate in float, float64 in double. Launches are asynchronous on XLA's
// stream; the handler only reports launch errors.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "rms_norm_checks.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace rms_norm {
namespace {

constexpr int kThreads = 256;             // threads per block (a multiple of 32)
constexpr std::int64_t kMaxBlocks = 1 << 16;  // blocks loop over rows beyond this

template <typename T>
struct Device;

template <>
struct Device<float> {
  using Acc = float;
  __device__ static float load(float v) { return v; }
  __device__ static float store(float v) { return v; }
};

template <>
struct Device<double> {
  using Acc = double;
  __device__ static double load(double v) { return v; }
  __device__ static double store(double v) { return v; }
};

template <>
struct Device<__nv_bfloat16> {
  using Acc = float;
  __device__ static float load(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
};

// Sum of `value` over the block; every thread gets the result. `scratch`
// holds one value per warp.
template <typename Acc>
__device__ Acc block_sum(Acc value, Acc* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) {
    value += __shfl_down_sync(0xffffffffu, value, offset);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  Acc total = 0;
  for (int w = 0; w < kThreads / 32; ++w) total += scratch[w];
  __syncthreads();  // scratch is reused by the next row
  return total;
}

template <typename T, typename R>
__global__ void forward_kernel(const T* __restrict__ x, T* __restrict__ y, R* __restrict__ rinv,
                               std::int64_t rows, std::int64_t n, double eps) {
  using D = Device<T>;
  using Acc = typename D::Acc;
  __shared__ Acc scratch[kThreads / 32];
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * n;
    T* yr = y + row * n;
    Acc sum = 0;
    for (std::int64_t i = threadIdx.x; i < n; i += kThreads) {
      const Acc v = D::load(xr[i]);
      sum += v * v;
    }
    sum = block_sum(sum, scratch);
    const Acc r = Acc(1) / sqrt(sum / Acc(n) + Acc(eps));
    for (std::int64_t i = threadIdx.x; i < n; i += kThreads) yr[i] = D::store(D::load(xr[i]) * r);
    if (threadIdx.x == 0) rinv[row] = static_cast<R>(r);
  }
}

template <typename T, typename R>
__global__ void backward_kernel(const T* __restrict__ x, const R* __restrict__ rinv,
                                const T* __restrict__ g, T* __restrict__ dx, std::int64_t rows,
                                std::int64_t n) {
  using D = Device<T>;
  using Acc = typename D::Acc;
  __shared__ Acc scratch[kThreads / 32];
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * n;
    const T* gr = g + row * n;
    T* dxr = dx + row * n;
    Acc gx = 0;
    for (std::int64_t i = threadIdx.x; i < n; i += kThreads) gx += D::load(gr[i]) * D::load(xr[i]);
    gx = block_sum(gx, scratch);
    const Acc r = static_cast<Acc>(rinv[row]);
    const Acc c = r * r * r * gx / Acc(n);
    for (std::int64_t i = threadIdx.x; i < n; i += kThreads) {
      dxr[i] = D::store(r * D::load(gr[i]) - c * D::load(xr[i]));
    }
  }
}

int blocks_for(std::int64_t rows) {
  return static_cast<int>(std::min<std::int64_t>(rows, kMaxBlocks));
}

ffi::Error launched(const char* op) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) {
    return ffi::Error::Internal(std::string(op) + ": CUDA launch failed: " +
                                cudaGetErrorString(status));
  }
  return ffi::Error::Success();
}

template <typename T, typename R>
void launch_forward(cudaStream_t stream, const ffi::AnyBuffer& x, ffi::AnyBuffer& y,
                    ffi::AnyBuffer& rinv, Geometry g, double eps) {
  forward_kernel<T, R><<<blocks_for(g.rows), kThreads, 0, stream>>>(
      static_cast<const T*>(x.untyped_data()), static_cast<T*>(y.untyped_data()),
      static_cast<R*>(rinv.untyped_data()), g.rows, g.cols, eps);
}

template <typename T, typename R>
void launch_backward(cudaStream_t stream, const ffi::AnyBuffer& x, const ffi::AnyBuffer& rinv,
                     const ffi::AnyBuffer& ct, ffi::AnyBuffer& dx, Geometry g) {
  backward_kernel<T, R><<<blocks_for(g.rows), kThreads, 0, stream>>>(
      static_cast<const T*>(x.untyped_data()), static_cast<const R*>(rinv.untyped_data()),
      static_cast<const T*>(ct.untyped_data()), static_cast<T*>(dx.untyped_data()), g.rows,
      g.cols);
}

ffi::Error ForwardImpl(cudaStream_t stream, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y,
                       ffi::Result<ffi::AnyBuffer> rinv, double eps) {
  constexpr const char* op = "rms_norm_fwd";
  Geometry g;
  if (auto error = check_forward(x, *y, *rinv, eps, g)) return *error;
  if (g.rows == 0) return ffi::Error::Success();
  switch (x.element_type()) {
    case ffi::DataType::F32: launch_forward<float, float>(stream, x, *y, *rinv, g, eps); break;
    case ffi::DataType::F64: launch_forward<double, double>(stream, x, *y, *rinv, g, eps); break;
    case ffi::DataType::BF16:
      launch_forward<__nv_bfloat16, float>(stream, x, *y, *rinv, g, eps);
      break;
    default: return ffi::Error::Internal("rms_norm_fwd: dtype passed the checks but has no kernel");
  }
  return launched(op);
}

ffi::Error BackwardImpl(cudaStream_t stream, ffi::AnyBuffer x, ffi::AnyBuffer rinv,
                        ffi::AnyBuffer ct, ffi::Result<ffi::AnyBuffer> dx) {
  constexpr const char* op = "rms_norm_bwd";
  Geometry g;
  if (auto error = check_backward(x, rinv, ct, *dx, g)) return *error;
  if (g.rows == 0) return ffi::Error::Success();
  switch (x.element_type()) {
    case ffi::DataType::F32: launch_backward<float, float>(stream, x, rinv, ct, *dx, g); break;
    case ffi::DataType::F64: launch_backward<double, double>(stream, x, rinv, ct, *dx, g); break;
    case ffi::DataType::BF16:
      launch_backward<__nv_bfloat16, float>(stream, x, rinv, ct, *dx, g);
      break;
    default: return ffi::Error::Internal("rms_norm_bwd: dtype passed the checks but has no kernel");
  }
  return launched(op);
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
