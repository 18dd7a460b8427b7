// XLA FFI handler of the op on the CPU.
//
// TODO: your op's computation. The skeleton's op is the identity: it copies
// x to y. One handler serves float32 and float64: the operands arrive as
// ffi::AnyBuffer and it dispatches on the element type. The Python primitive
// checks its operands at trace time; this handler checks them again (checks.h
// says why), in error messages that start with OP_NAME, the op's name, which
// CMakeLists.txt defines.
#include <cstdint>

#include "checks.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace op {
namespace {

template <typename T>
void compute(const ffi::AnyBuffer& x_buffer, ffi::AnyBuffer& y_buffer) {
  const T* x = static_cast<const T*>(x_buffer.untyped_data());
  T* y = static_cast<T*>(y_buffer.untyped_data());
  const std::int64_t size = static_cast<std::int64_t>(x_buffer.element_count());
  // TODO: your op. The skeleton: y = x * 1.
  for (std::int64_t i = 0; i < size; ++i) y[i] = x[i] * T(1);
}

ffi::Error Compute(ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y) {
  // TODO: your checks. The result must have the shape and the float dtype of x.
  if (auto error = check_like_x(x, {Named{"output y", *y}})) return *error;
  if (x.element_type() == ffi::DataType::F32) {
    compute<float>(x, *y);
  } else {
    compute<double>(x, *y);
  }
  return ffi::Error::Success();
}

// The function XLA calls: guarded() (checks.h) keeps exceptions from it.
ffi::Error ComputeGuarded(ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y) noexcept {
  return guarded([&] { return Compute(x, y); });
}

}  // namespace
}  // namespace op

// The symbol the nanobind module (module.cc) wraps in a capsule. The binding
// declares what XLA passes in (TODO: one .Arg per operand of your op).
XLA_FFI_DEFINE_HANDLER_SYMBOL(OpCpu, op::ComputeGuarded,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::AnyBuffer>()   // x
                                  .Ret<ffi::AnyBuffer>());  // y
