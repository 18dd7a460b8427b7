// XLA FFI handler for the tridiagonal matrix-vector product on the CPU.
//
// y[i] = dl[i] * x[i-1] + d[i] * x[i] + du[i] * x[i+1] along the last axis;
// every leading axis is a batch of rows. One handler serves float32 and
// float64: the operands arrive as ffi::AnyBuffer and it dispatches on the
// element type. The Python primitive checks its operands at trace time; this
// handler checks them again, because XLA hands over whatever buffers a caller
// declared (jax.ffi.ffi_call with a wrong result shape is no error anywhere
// else) and a mismatch here would read or write out of bounds. OP_NAME, the
// op's name in error messages, is defined by CMakeLists.txt.
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

constexpr const char* kOp = OP_NAME;

std::string dtype_name(ffi::DataType dtype) {
  switch (dtype) {
    case ffi::DataType::F32: return "float32";
    case ffi::DataType::F64: return "float64";
    case ffi::DataType::BF16: return "bfloat16";
    case ffi::DataType::F16: return "float16";
    case ffi::DataType::S32: return "int32";
    case ffi::DataType::S64: return "int64";
    default: return "XLA type #" + std::to_string(static_cast<int>(dtype));
  }
}

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
  return ffi::Error::InvalidArgument(std::string(kOp) + ": " + what);
}

// Every buffer must have the rank >= 1 shape and the float dtype of x.
std::optional<ffi::Error> check(const ffi::AnyBuffer& dl, const ffi::AnyBuffer& d,
                                const ffi::AnyBuffer& du, const ffi::AnyBuffer& x,
                                const ffi::AnyBuffer& y) {
  if (x.dimensions().size() < 1) return invalid("x must have at least one axis");
  if (x.element_type() != ffi::DataType::F32 && x.element_type() != ffi::DataType::F64) {
    return invalid("unsupported dtype " + dtype_name(x.element_type()) +
                   "; expected float32 or float64");
  }
  const char* names[] = {"dl", "d", "du", "output y"};
  const ffi::AnyBuffer* buffers[] = {&dl, &d, &du, &y};
  for (int k = 0; k < 4; ++k) {
    if (buffers[k]->element_type() != x.element_type()) {
      return invalid(std::string(names[k]) + " has dtype " +
                     dtype_name(buffers[k]->element_type()) + ", expected " +
                     dtype_name(x.element_type()));
    }
    if (!same_dims(buffers[k]->dimensions(), x.dimensions())) {
      return invalid(std::string(names[k]) + " has shape " +
                     shape_string(buffers[k]->dimensions()) + ", expected " +
                     shape_string(x.dimensions()));
    }
  }
  return std::nullopt;
}

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
  if (auto error = check(dl, d, du, x, *y)) return *error;
  if (x.element_type() == ffi::DataType::F32) {
    matvec<float>(dl, d, du, x, *y);
  } else {
    matvec<double>(dl, d, du, x, *y);
  }
  return ffi::Error::Success();
}

// XLA calls the handler through a C function from code built without
// exceptions: one that escaped would end the process. Nothing above throws but
// the allocation of an error message (std::bad_alloc); turn any exception into
// an ffi::Error, which JAX raises as jax.errors.JaxRuntimeError.
ffi::Error MatvecGuarded(ffi::AnyBuffer dl, ffi::AnyBuffer d, ffi::AnyBuffer du,
                         ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y) noexcept {
  try {
    return Matvec(dl, d, du, x, y);
  } catch (const std::bad_alloc&) {
    // A literal message: building one from kOp could itself run out of memory.
    return ffi::Error(ffi::ErrorCode::kResourceExhausted, OP_NAME ": out of memory");
  } catch (...) {
    return ffi::Error(ffi::ErrorCode::kInternal, OP_NAME ": C++ exception");
  }
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
