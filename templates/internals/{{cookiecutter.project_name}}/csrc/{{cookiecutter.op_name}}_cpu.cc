// XLA FFI handler for the tridiagonal matrix-vector product on the CPU.
//
// y[i] = dl[i] * x[i-1] + d[i] * x[i] + du[i] * x[i+1] along the last axis;
// every leading axis is a batch of rows. One handler serves float32 and
// float64: the operands arrive as ffi::AnyBuffer and it dispatches on the
// element type. The Python primitive checks its operands at trace time; this
// handler checks them again (checks.h says why), in error messages that start
// with OP_NAME, the op's name, which CMakeLists.txt defines.
#include <cstdint>

#include "checks.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace op {
namespace {

template <typename T>
void matvec(const ffi::AnyBuffer& dl_buffer, const ffi::AnyBuffer& d_buffer,
            const ffi::AnyBuffer& du_buffer, const ffi::AnyBuffer& x_buffer,
            ffi::AnyBuffer& y_buffer) {
  const T* dl = static_cast<const T*>(dl_buffer.untyped_data());
  const T* d = static_cast<const T*>(d_buffer.untyped_data());
  const T* du = static_cast<const T*>(du_buffer.untyped_data());
  const T* x = static_cast<const T*>(x_buffer.untyped_data());
  T* y = static_cast<T*>(y_buffer.untyped_data());
  const std::int64_t n = x_buffer.dimensions().back();
  const std::int64_t size = static_cast<std::int64_t>(x_buffer.element_count());
  for (std::int64_t row = 0; row < size; row += n) {
    for (std::int64_t i = row; i < row + n; ++i) {
      // The same order of operations as the StableHLO lowering; the corners
      // dl[row] and du[row + n - 1] lie outside the matrix and are never read.
      T sum = i > row ? dl[i] * x[i - 1] : T(0);
      sum += d[i] * x[i];
      if (i + 1 < row + n) sum += du[i] * x[i + 1];
      y[i] = sum;
    }
  }
}

ffi::Error Matvec(ffi::AnyBuffer dl, ffi::AnyBuffer d, ffi::AnyBuffer du, ffi::AnyBuffer x,
                  ffi::Result<ffi::AnyBuffer> y) {
  // Every buffer must have the rank >= 1 shape and the float dtype of x.
  if (x.dimensions().size() < 1) return invalid("x must have at least one axis");
  if (auto error = check_like_x(x, {Named{"dl", dl}, Named{"d", d}, Named{"du", du},
                                    Named{"output y", *y}})) {
    return *error;
  }
  if (x.element_type() == ffi::DataType::F32) {
    matvec<float>(dl, d, du, x, *y);
  } else {
    matvec<double>(dl, d, du, x, *y);
  }
  return ffi::Error::Success();
}

// The function XLA calls: guarded() (checks.h) keeps exceptions from it.
ffi::Error MatvecGuarded(ffi::AnyBuffer dl, ffi::AnyBuffer d, ffi::AnyBuffer du,
                         ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y) noexcept {
  return guarded([&] { return Matvec(dl, d, du, x, y); });
}

}  // namespace
}  // namespace op

// The symbol the nanobind module (module.cc) wraps in a capsule. The binding
// declares what XLA passes in: four operands and one result.
XLA_FFI_DEFINE_HANDLER_SYMBOL(OpCpu, op::MatvecGuarded,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::AnyBuffer>()   // dl
                                  .Arg<ffi::AnyBuffer>()   // d
                                  .Arg<ffi::AnyBuffer>()   // du
                                  .Arg<ffi::AnyBuffer>()   // x
                                  .Ret<ffi::AnyBuffer>());  // y
