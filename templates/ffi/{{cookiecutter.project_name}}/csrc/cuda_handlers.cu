// XLA FFI handlers for the op on NVIDIA GPUs: the same rows (the op's kernel
// file, csrc/<op>_kernels.h), the same argument checks (checks.h) and the
// same residual as the CPU handlers, so the op's jax.custom_vjp pairs them the
// same way.
//
// One thread block per row (grid-stride over rows): each thread sums its
// share of the row in double, the block combines the shares with warp
// shuffles, each thread writes its share (cuda_block.h: the same code
// kernel_check.cc runs on the CPU).
// Launches are asynchronous on XLA's stream; the handler reports launch
// errors only.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "checks.h"
#include "cuda_block.h"
#include "guard.h"
#include "op.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace rowwise {
namespace {

constexpr std::int64_t kMaxBlocks = 1 << 16;  // blocks loop over rows beyond this

// Storage type -> compute type and conversions, for cuda_block.h.
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

// Sum and max of `value` over the block; every thread gets the result.
// `scratch` holds one value per warp.
__device__ inline Accumulator block_sum(Accumulator value, Accumulator* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) {
    value += __shfl_down_sync(0xffffffffu, value, offset);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  Accumulator total = 0;
  for (int w = 0; w < kBlockThreads / 32; ++w) total += scratch[w];
  __syncthreads();  // scratch is reused by the next reduction
  return total;
}

__device__ inline Accumulator block_max(Accumulator value, Accumulator* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) {
    value = fmax(value, __shfl_down_sync(0xffffffffu, value, offset));
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  Accumulator best = scratch[0];
  for (int w = 1; w < kBlockThreads / 32; ++w) best = fmax(best, scratch[w]);
  __syncthreads();
  return best;
}

// The Block of BlockRow (cuda_block.h) on the GPU: this thread's share,
// combined over the block.
struct GpuBlock {
  Accumulator* scratch;
  template <typename Share>
  __device__ Accumulator sum(const Share& share, std::int64_t first) const {
    return block_sum(share(first), scratch);
  }
  template <typename Share>
  __device__ Accumulator max(const Share& share, std::int64_t first) const {
    return block_max(share(first), scratch);
  }
};

template <typename T, typename R>
__global__ void forward_kernel(const T* __restrict__ x, T* __restrict__ y,
                               R* __restrict__ residual, std::int64_t rows, std::int64_t n,
                               op::Attributes attributes) {
  __shared__ Accumulator scratch[kBlockThreads / 32];
  const BlockRow<Device<T>, GpuBlock> row{n, threadIdx.x, GpuBlock{scratch}};
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const double value = op::forward_row(row, x + r * n, y + r * n, attributes);
    if (threadIdx.x == 0) residual[r] = static_cast<R>(value);
  }
}

template <typename T, typename R>
__global__ void backward_kernel(const T* __restrict__ x, const R* __restrict__ residual,
                                const T* __restrict__ g, T* __restrict__ dx, std::int64_t rows,
                                std::int64_t n, op::Attributes attributes) {
  __shared__ Accumulator scratch[kBlockThreads / 32];
  const BlockRow<Device<T>, GpuBlock> row{n, threadIdx.x, GpuBlock{scratch}};
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    op::backward_row(row, x + r * n, static_cast<double>(residual[r]), g + r * n, dx + r * n,
                     attributes);
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
                          ffi::AnyBuffer& residual, Geometry g, const op::Attributes& a) {
  return launch_checked(OP_NAME "_forward", [&] {
    forward_kernel<T, R><<<blocks_for(g.rows), kBlockThreads, 0, stream>>>(
        static_cast<const T*>(x.untyped_data()), static_cast<T*>(y.untyped_data()),
        static_cast<R*>(residual.untyped_data()), g.rows, g.cols, a);
  });
}

template <typename T, typename R>
ffi::Error launch_backward(cudaStream_t stream, const ffi::AnyBuffer& x,
                           const ffi::AnyBuffer& residual, const ffi::AnyBuffer& ct,
                           ffi::AnyBuffer& dx, Geometry g, const op::Attributes& a) {
  return launch_checked(OP_NAME "_backward", [&] {
    backward_kernel<T, R><<<blocks_for(g.rows), kBlockThreads, 0, stream>>>(
        static_cast<const T*>(x.untyped_data()), static_cast<const R*>(residual.untyped_data()),
        static_cast<const T*>(ct.untyped_data()), static_cast<T*>(dx.untyped_data()), g.rows,
        g.cols, a);
  });
}

ffi::Error Forward(cudaStream_t stream, const ffi::AnyBuffer& x, ffi::AnyBuffer& y,
                   ffi::AnyBuffer& residual, const ffi::Dictionary& given) {
  Geometry g;
  op::Attributes a;
  if (auto error = check_forward(x, y, residual, given, a, g)) return *error;
  if (g.rows == 0) return ffi::Error::Success();
  switch (x.element_type()) {
    case ffi::DataType::F32: return launch_forward<float, float>(stream, x, y, residual, g, a);
    case ffi::DataType::F64: return launch_forward<double, double>(stream, x, y, residual, g, a);
    case ffi::DataType::BF16:
      return launch_forward<__nv_bfloat16, float>(stream, x, y, residual, g, a);
    default: return ffi::Error::Internal(OP_NAME "_forward: dtype passed the checks but has no kernel");
  }
}

ffi::Error Backward(cudaStream_t stream, const ffi::AnyBuffer& x, const ffi::AnyBuffer& residual,
                    const ffi::AnyBuffer& ct, ffi::AnyBuffer& dx, const ffi::Dictionary& given) {
  Geometry g;
  op::Attributes a;
  if (auto error = check_backward(x, residual, ct, dx, given, a, g)) return *error;
  if (g.rows == 0) return ffi::Error::Success();
  switch (x.element_type()) {
    case ffi::DataType::F32: return launch_backward<float, float>(stream, x, residual, ct, dx, g, a);
    case ffi::DataType::F64: return launch_backward<double, double>(stream, x, residual, ct, dx, g, a);
    case ffi::DataType::BF16:
      return launch_backward<__nv_bfloat16, float>(stream, x, residual, ct, dx, g, a);
    default: return ffi::Error::Internal(OP_NAME "_backward: dtype passed the checks but has no kernel");
  }
}

// The functions XLA calls: each runs its body through guarded(), so no C++
// exception reaches XLA (see guard.h).
ffi::Error ForwardImpl(cudaStream_t stream, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y,
                       ffi::Result<ffi::AnyBuffer> residual, ffi::Dictionary attributes) {
  return guarded(OP_NAME "_forward", [&] { return Forward(stream, x, *y, *residual, attributes); });
}

ffi::Error BackwardImpl(cudaStream_t stream, ffi::AnyBuffer x, ffi::AnyBuffer residual,
                        ffi::AnyBuffer ct, ffi::Result<ffi::AnyBuffer> dx,
                        ffi::Dictionary attributes) {
  return guarded(OP_NAME "_backward",
                 [&] { return Backward(stream, x, residual, ct, *dx, attributes); });
}

}  // namespace
}  // namespace rowwise

// Kernel launches on XLA's stream are safe to capture in CUDA graphs, hence
// kCmdBufferCompatible.
XLA_FFI_DEFINE_HANDLER_SYMBOL(RowwiseForwardCuda, rowwise::ForwardImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::AnyBuffer>()  // x
                                  .Ret<ffi::AnyBuffer>()  // y
                                  .Ret<ffi::AnyBuffer>()  // the residual, one per row
                                  .Attrs(),  // the op's attributes, by name
                              {ffi::Traits::kCmdBufferCompatible});

XLA_FFI_DEFINE_HANDLER_SYMBOL(RowwiseBackwardCuda, rowwise::BackwardImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::AnyBuffer>()   // x
                                  .Arg<ffi::AnyBuffer>()   // residual from the forward
                                  .Arg<ffi::AnyBuffer>()   // cotangent of y
                                  .Ret<ffi::AnyBuffer>()   // dx
                                  .Attrs(),  // the op's attributes, by name
                              {ffi::Traits::kCmdBufferCompatible});
