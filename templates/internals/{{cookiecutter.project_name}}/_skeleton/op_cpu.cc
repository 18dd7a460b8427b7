// XLA FFI handler of the op on the CPU.
//
// TODO: your op's computation. The skeleton's op is the identity: it copies
// x to y. One handler serves float32 and float64: the operands arrive as
// ffi::AnyBuffer and it dispatches on the element type. The Python primitive
// checks its operands at trace time; this handler checks them again, because
// XLA hands over whatever buffers a caller declared and a mismatch here would
// read or write out of bounds. OP_NAME, the op's name in error messages, is
// defined by CMakeLists.txt.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <optional>
#include <string>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace op {
namespace {

std::string shape_string(ffi::AnyBuffer::Dimensions dims) {
  std::string s = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + (dims.size() == 1 ? ",)" : ")");
}

bool same_dims(ffi::AnyBuffer::Dimensions a, ffi::AnyBuffer::Dimensions b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

ffi::Error invalid(const std::string& what) {
  return ffi::Error::InvalidArgument(std::string(OP_NAME) + ": " + what);
}

// The result must have the shape and the float dtype of x.
std::optional<ffi::Error> check(const ffi::AnyBuffer& x, const ffi::AnyBuffer& y) {
  if (x.element_type() != ffi::DataType::F32 && x.element_type() != ffi::DataType::F64) {
    return invalid("unsupported dtype; expected float32 or float64");
  }
  if (y.element_type() != x.element_type()) return invalid("output y has another dtype than x");
  if (!same_dims(y.dimensions(), x.dimensions())) {
    return invalid("output y has shape " + shape_string(y.dimensions()) + ", expected " +
                   shape_string(x.dimensions()));
  }
  return std::nullopt;
}

template <typename T>
void compute(const ffi::AnyBuffer& x_buffer, ffi::AnyBuffer& y_buffer) {
  const T* x = static_cast<const T*>(x_buffer.untyped_data());
  T* y = static_cast<T*>(y_buffer.untyped_data());
  const std::int64_t size = static_cast<std::int64_t>(x_buffer.element_count());
  // TODO: your op. The skeleton: y = x * 1.
  for (std::int64_t i = 0; i < size; ++i) y[i] = x[i] * T(1);
}

ffi::Error Compute(ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y) {
  if (auto error = check(x, *y)) return *error;
  if (x.element_type() == ffi::DataType::F32) {
    compute<float>(x, *y);
  } else {
    compute<double>(x, *y);
  }
  return ffi::Error::Success();
}

// XLA calls the handler through a C function from code built without
// exceptions: one that escaped would end the process. Turn any exception into
// an ffi::Error, which JAX raises as jax.errors.JaxRuntimeError.
ffi::Error ComputeGuarded(ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y) noexcept {
  try {
    return Compute(x, y);
  } catch (const std::bad_alloc&) {
    return ffi::Error(ffi::ErrorCode::kResourceExhausted, OP_NAME ": out of memory");
  } catch (...) {
    return ffi::Error(ffi::ErrorCode::kInternal, OP_NAME ": C++ exception");
  }
}

}  // namespace
}  // namespace op

// The symbol the nanobind module (module.cc) wraps in a capsule. The binding
// declares what XLA passes in (TODO: one .Arg per operand of your op).
XLA_FFI_DEFINE_HANDLER_SYMBOL(OpCpu, op::ComputeGuarded,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::AnyBuffer>()   // x
                                  .Ret<ffi::AnyBuffer>());  // y
