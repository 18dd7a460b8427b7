// XLA FFI handlers for RMS normalisation on the CPU.
//
// One handler per direction serves every supported dtype: x arrives as an
// ffi::AnyBuffer and the handler dispatches on its element type. Rows are
// split into chunks that run on XLA's intra-op thread pool (ffi::ThreadPool,
// the pool XLA's own CPU kernels use) and on the calling thread.
#include <cstdint>

#include "rms_norm_checks.h"
#include "rms_norm_guard.h"
#include "rms_norm_kernels.h"
#include "rms_norm_run.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace rms_norm {
namespace {

// The buffers as typed pointers for run_forward and run_backward
// (rms_norm_run.h), once the checks have matched their dtypes and shapes.
template <typename T>
void forward_buffers(ffi::ThreadPool& pool, const ffi::AnyBuffer& x, ffi::AnyBuffer& y,
                     ffi::AnyBuffer& rinv, Geometry g, double eps) {
  using R = typename Traits<T>::Residual;
  run_forward(pool, static_cast<const T*>(x.untyped_data()), static_cast<T*>(y.untyped_data()),
              static_cast<R*>(rinv.untyped_data()), g.rows, g.cols, eps);
}

template <typename T>
void backward_buffers(ffi::ThreadPool& pool, const ffi::AnyBuffer& x, const ffi::AnyBuffer& rinv,
                      const ffi::AnyBuffer& ct, ffi::AnyBuffer& dx, Geometry g) {
  using R = typename Traits<T>::Residual;
  run_backward(pool, static_cast<const T*>(x.untyped_data()),
               static_cast<const R*>(rinv.untyped_data()), static_cast<const T*>(ct.untyped_data()),
               static_cast<T*>(dx.untyped_data()), g.rows, g.cols);
}

ffi::Error Forward(ffi::ThreadPool& pool, const ffi::AnyBuffer& x, ffi::AnyBuffer& y,
                   ffi::AnyBuffer& rinv, double eps) {
  Geometry g;
  if (auto error = check_forward(x, y, rinv, eps, g)) return *error;
  switch (x.element_type()) {
    case ffi::DataType::F32: forward_buffers<float>(pool, x, y, rinv, g, eps); break;
    case ffi::DataType::F64: forward_buffers<double>(pool, x, y, rinv, g, eps); break;
    case ffi::DataType::BF16: forward_buffers<BFloat16>(pool, x, y, rinv, g, eps); break;
    default: return ffi::Error::Internal("rms_norm_fwd: dtype passed the checks but has no kernel");
  }
  return ffi::Error::Success();
}

ffi::Error Backward(ffi::ThreadPool& pool, const ffi::AnyBuffer& x, const ffi::AnyBuffer& rinv,
                    const ffi::AnyBuffer& ct, ffi::AnyBuffer& dx) {
  Geometry g;
  if (auto error = check_backward(x, rinv, ct, dx, g)) return *error;
  switch (x.element_type()) {
    case ffi::DataType::F32: backward_buffers<float>(pool, x, rinv, ct, dx, g); break;
    case ffi::DataType::F64: backward_buffers<double>(pool, x, rinv, ct, dx, g); break;
    case ffi::DataType::BF16: backward_buffers<BFloat16>(pool, x, rinv, ct, dx, g); break;
    default: return ffi::Error::Internal("rms_norm_bwd: dtype passed the checks but has no kernel");
  }
  return ffi::Error::Success();
}

// The functions XLA calls: each runs its body through guarded(), so no C++
// exception reaches XLA (see rms_norm_guard.h).
ffi::Error ForwardImpl(ffi::ThreadPool pool, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y,
                       ffi::Result<ffi::AnyBuffer> rinv, double eps) {
  return guarded("rms_norm_fwd", [&] { return Forward(pool, x, *y, *rinv, eps); });
}

ffi::Error BackwardImpl(ffi::ThreadPool pool, ffi::AnyBuffer x, ffi::AnyBuffer rinv,
                        ffi::AnyBuffer ct, ffi::Result<ffi::AnyBuffer> dx) {
  return guarded("rms_norm_bwd", [&] { return Backward(pool, x, rinv, ct, *dx); });
}

}  // namespace
}  // namespace rms_norm

// The symbols the nanobind module (module.cc) wraps in capsules. The binding
// declares what XLA passes in: XLA decodes and type-checks the call frame
// against it (an attribute of the wrong type fails here, before the handler).
XLA_FFI_DEFINE_HANDLER_SYMBOL(RmsNormForwardCpu, rms_norm::ForwardImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::AnyBuffer>()  // x
                                  .Ret<ffi::AnyBuffer>()  // y
                                  .Ret<ffi::AnyBuffer>()  // rinv = 1 / rms, per row
                                  .Attr<double>("eps"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(RmsNormBackwardCpu, rms_norm::BackwardImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::AnyBuffer>()   // x
                                  .Arg<ffi::AnyBuffer>()   // rinv from the forward
                                  .Arg<ffi::AnyBuffer>()   // cotangent of y
                                  .Ret<ffi::AnyBuffer>());  // dx
