// XLA FFI handlers for the op on the CPU (its rows: csrc/<op>_kernels.h).
//
// One handler per direction serves every supported dtype: x arrives as an
// ffi::AnyBuffer and the handler dispatches on its element type. Rows are
// split into chunks that run on XLA's intra-op thread pool (ffi::ThreadPool,
// the pool XLA's own CPU kernels use) and on the calling thread.
#include <cstdint>

#include "checks.h"
#include "cpu_rows.h"
#include "guard.h"
#include "op.h"
#include "run.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace rowwise {
namespace {

// The buffers as typed pointers for run_forward and run_backward (run.h),
// once the checks have matched their dtypes and shapes.
template <typename T>
void forward_buffers(ffi::ThreadPool& pool, const ffi::AnyBuffer& x, ffi::AnyBuffer& y,
                     ffi::AnyBuffer& residual, Geometry g, const op::Attributes& attributes) {
  using R = typename Traits<T>::Residual;
  run_forward(pool, static_cast<const T*>(x.untyped_data()), static_cast<T*>(y.untyped_data()),
              static_cast<R*>(residual.untyped_data()), g.rows, g.cols, attributes);
}

template <typename T>
void backward_buffers(ffi::ThreadPool& pool, const ffi::AnyBuffer& x,
                      const ffi::AnyBuffer& residual, const ffi::AnyBuffer& ct, ffi::AnyBuffer& dx,
                      Geometry g, const op::Attributes& attributes) {
  using R = typename Traits<T>::Residual;
  run_backward(pool, static_cast<const T*>(x.untyped_data()),
               static_cast<const R*>(residual.untyped_data()),
               static_cast<const T*>(ct.untyped_data()), static_cast<T*>(dx.untyped_data()),
               g.rows, g.cols, attributes);
}

constexpr const char* kForward = OP_NAME "_forward";
constexpr const char* kBackward = OP_NAME "_backward";

ffi::Error Forward(ffi::ThreadPool& pool, const ffi::AnyBuffer& x, ffi::AnyBuffer& y,
                   ffi::AnyBuffer& residual, const ffi::Dictionary& given) {
  Geometry g;
  op::Attributes a;
  if (auto error = check_forward(x, y, residual, given, a, g)) return *error;
  switch (x.element_type()) {
    case ffi::DataType::F32: forward_buffers<float>(pool, x, y, residual, g, a); break;
    case ffi::DataType::F64: forward_buffers<double>(pool, x, y, residual, g, a); break;
    case ffi::DataType::BF16: forward_buffers<BFloat16>(pool, x, y, residual, g, a); break;
    default: return failure(ffi::ErrorCode::kInternal, kForward, "dtype passed the checks but has no kernel");
  }
  return ffi::Error::Success();
}

ffi::Error Backward(ffi::ThreadPool& pool, const ffi::AnyBuffer& x, const ffi::AnyBuffer& residual,
                    const ffi::AnyBuffer& ct, ffi::AnyBuffer& dx, const ffi::Dictionary& given) {
  Geometry g;
  op::Attributes a;
  if (auto error = check_backward(x, residual, ct, dx, given, a, g)) return *error;
  switch (x.element_type()) {
    case ffi::DataType::F32: backward_buffers<float>(pool, x, residual, ct, dx, g, a); break;
    case ffi::DataType::F64: backward_buffers<double>(pool, x, residual, ct, dx, g, a); break;
    case ffi::DataType::BF16: backward_buffers<BFloat16>(pool, x, residual, ct, dx, g, a); break;
    default: return failure(ffi::ErrorCode::kInternal, kBackward, "dtype passed the checks but has no kernel");
  }
  return ffi::Error::Success();
}

// The functions XLA calls: each runs its body through guarded(), so no C++
// exception reaches XLA (see guard.h).
ffi::Error ForwardImpl(ffi::ThreadPool pool, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y,
                       ffi::Result<ffi::AnyBuffer> residual, ffi::Dictionary attributes) {
  return guarded(kForward, [&] { return Forward(pool, x, *y, *residual, attributes); });
}

ffi::Error BackwardImpl(ffi::ThreadPool pool, ffi::AnyBuffer x, ffi::AnyBuffer residual,
                        ffi::AnyBuffer ct, ffi::Result<ffi::AnyBuffer> dx,
                        ffi::Dictionary attributes) {
  return guarded(kBackward, [&] { return Backward(pool, x, residual, ct, *dx, attributes); });
}

}  // namespace
}  // namespace rowwise

// The symbols the nanobind module (module.cc) wraps in capsules. The binding
// declares what XLA passes in: XLA decodes and type-checks the buffers
// against it; the attributes arrive as a dictionary, which check_attributes
// (checks.h) matches against the op's declared names and types.
XLA_FFI_DEFINE_HANDLER_SYMBOL(RowwiseForwardCpu, rowwise::ForwardImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::AnyBuffer>()  // x
                                  .Ret<ffi::AnyBuffer>()  // y
                                  .Ret<ffi::AnyBuffer>()  // the residual, one per row
                                  .Attrs());  // the op's attributes, by name

XLA_FFI_DEFINE_HANDLER_SYMBOL(RowwiseBackwardCpu, rowwise::BackwardImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::AnyBuffer>()   // x
                                  .Arg<ffi::AnyBuffer>()   // the residual from the forward
                                  .Arg<ffi::AnyBuffer>()   // cotangent of y
                                  .Ret<ffi::AnyBuffer>()   // dx
                                  .Attrs());  // the op's attributes, by name
