// What the op's CPU handler checks before it reads a buffer, and the guard
// that keeps its C++ exceptions from XLA. XLA hands over whatever buffers a
// caller declared (jax.ffi.ffi_call with a wrong result shape is no error
// anywhere else): a mismatch the handler did not refuse would read or write
// out of bounds. Every refusal is an ffi::Error whose message starts with the
// op's name, OP_NAME (defined by CMakeLists.txt); JAX raises it as
// jax.errors.JaxRuntimeError.
#pragma once

#include <cstddef>
#include <exception>
#include <initializer_list>
#include <new>
#include <optional>
#include <string>

#include "xla/ffi/api/ffi.h"

namespace op {

namespace ffi = xla::ffi;

inline std::string dtype_name(ffi::DataType dtype) {
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

inline std::string shape_string(ffi::AnyBuffer::Dimensions dims) {
  std::string s = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + (dims.size() == 1 ? ",)" : ")");
}

inline bool same_dims(ffi::AnyBuffer::Dimensions a, ffi::AnyBuffer::Dimensions b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

inline ffi::Error invalid(const std::string& what) {
  return ffi::Error::InvalidArgument(std::string(OP_NAME) + ": " + what);
}

// A buffer, and its name in error messages.
struct Named {
  const char* name;
  const ffi::AnyBuffer& buffer;
};

// x must be float32 or float64, and each of the other buffers must have its
// dtype and shape.
inline std::optional<ffi::Error> check_like_x(const ffi::AnyBuffer& x,
                                              std::initializer_list<Named> others) {
  if (x.element_type() != ffi::DataType::F32 && x.element_type() != ffi::DataType::F64) {
    return invalid("unsupported dtype " + dtype_name(x.element_type()) +
                   "; expected float32 or float64");
  }
  for (const Named& other : others) {
    if (other.buffer.element_type() != x.element_type()) {
      return invalid(std::string(other.name) + " has dtype " +
                     dtype_name(other.buffer.element_type()) + ", expected " +
                     dtype_name(x.element_type()));
    }
    if (!same_dims(other.buffer.dimensions(), x.dimensions())) {
      return invalid(std::string(other.name) + " has shape " +
                     shape_string(other.buffer.dimensions()) + ", expected " +
                     shape_string(x.dimensions()));
    }
  }
  return std::nullopt;
}

// XLA calls the handler through a C function from code built without
// exceptions: one that escaped would end the process. Nothing the checks do
// throws but the allocation of an error message (std::bad_alloc); guarded()
// runs the handler's body and turns any exception into an ffi::Error.
template <typename Body>
ffi::Error guarded(Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    // A literal message: building one could itself run out of memory.
    return ffi::Error(ffi::ErrorCode::kResourceExhausted, OP_NAME ": out of memory");
  } catch (...) {
    return ffi::Error(ffi::ErrorCode::kInternal, OP_NAME ": C++ exception");
  }
}

}  // namespace op
