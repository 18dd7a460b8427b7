// Argument checks shared by the CPU and CUDA handlers.
//
// XLA checks nothing for us: the FFI hands over whatever buffers the caller
// declared. A result shape that disagrees with the input is not an error
// anywhere else, so the handler must refuse it, or it would read or write out
// of bounds. Every failure is an InvalidArgument error whose message names the
// problem; JAX raises it in Python as jax.errors.JaxRuntimeError.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

#include "op.h"
#include "xla/ffi/api/ffi.h"

namespace rowwise {

namespace ffi = xla::ffi;

inline std::string dtype_name(ffi::DataType dtype) {
  switch (dtype) {
    case ffi::DataType::F32: return "float32";
    case ffi::DataType::F64: return "float64";
    case ffi::DataType::BF16: return "bfloat16";
    case ffi::DataType::F16: return "float16";
    case ffi::DataType::S32: return "int32";
    case ffi::DataType::S64: return "int64";
    case ffi::DataType::PRED: return "bool";
    case ffi::DataType::C64: return "complex64";
    case ffi::DataType::C128: return "complex128";
    default: return "XLA type #" + std::to_string(static_cast<int>(dtype));
  }
}

inline std::string shape_string(ffi::AnyBuffer::Dimensions dims) {
  std::string s = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    s += (i ? ", " : "") + std::to_string(dims[i]);
  }
  return s + (dims.size() == 1 ? ",)" : ")");
}

// The dtype of the per-row residual for an input dtype.
inline ffi::DataType residual_dtype(ffi::DataType dtype) {
  return dtype == ffi::DataType::F64 ? ffi::DataType::F64 : ffi::DataType::F32;
}

// Rows and row length of x: everything before the last axis is a row.
struct Geometry {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

inline std::optional<ffi::Error> check_input(const char* op, const ffi::AnyBuffer& x,
                                             Geometry& geometry) {
  const auto dims = x.dimensions();
  if (dims.size() < 1) {
    return ffi::Error::InvalidArgument(std::string(op) +
                                       ": x must have rank >= 1 (the op works on rows "
                                       "along the last axis), got a scalar");
  }
  const ffi::DataType dtype = x.element_type();
  if (dtype != ffi::DataType::F32 && dtype != ffi::DataType::F64 &&
      dtype != ffi::DataType::BF16) {
    return ffi::Error::InvalidArgument(std::string(op) + ": unsupported dtype " +
                                       dtype_name(dtype) +
                                       "; expected float32, float64 or bfloat16");
  }
  if (dims.back() == 0) {
    return ffi::Error::InvalidArgument(std::string(op) + ": x has rows of length 0 (shape " +
                                       shape_string(dims) +
                                       "); the op needs at least one element per row");
  }
  // Zero rows is fine: nothing to do. (XLA does not even call a handler
  // whose results are all empty.)
  geometry.cols = dims.back();
  geometry.rows = static_cast<std::int64_t>(x.element_count()) / geometry.cols;
  return std::nullopt;
}

// `buffer` must have the dtype and dimensions given.
inline std::optional<ffi::Error> check_same(const char* op, const char* what,
                                            const ffi::AnyBuffer& buffer, ffi::DataType dtype,
                                            ffi::AnyBuffer::Dimensions dims) {
  if (buffer.element_type() != dtype) {
    return ffi::Error::InvalidArgument(std::string(op) + ": " + what + " has dtype " +
                                       dtype_name(buffer.element_type()) + ", expected " +
                                       dtype_name(dtype));
  }
  const auto got = buffer.dimensions();
  bool same = got.size() == dims.size();
  for (std::size_t i = 0; same && i < dims.size(); ++i) same = got[i] == dims[i];
  if (!same) {
    return ffi::Error::InvalidArgument(std::string(op) + ": " + what + " has shape " +
                                       shape_string(got) + ", expected " + shape_string(dims));
  }
  return std::nullopt;
}

// The residual has x's shape without its last axis.
inline std::optional<ffi::Error> check_residual(const char* op, const char* what,
                                                const ffi::AnyBuffer& residual,
                                                const ffi::AnyBuffer& x) {
  const auto dims = x.dimensions();
  return check_same(op, what, residual, residual_dtype(x.element_type()), dims.first(dims.size() - 1));
}

// The op's attributes, one double each (op::Attributes, op::kAttributeNames).
inline constexpr std::size_t kAttributeCount = op::kAttributeNames.size();
static_assert(kAttributeCount == 0 ? std::is_empty_v<op::Attributes>
                                   : sizeof(op::Attributes) == kAttributeCount * sizeof(double),
              "op::Attributes must have one double member per name in op::kAttributeNames");

// "(a=1, b=2)": names with values, or names alone (an empty values).
template <typename Names, typename Values>
std::string attribute_list(const Names& names, const Values& values) {
  std::ostringstream out;
  out << "(";
  std::size_t i = 0;
  for (const auto& name : names) {
    out << (i ? ", " : "") << name;
    if (i < values.size()) out << "=" << values[i];
    ++i;
  }
  out << ")";
  return out.str();
}

template <std::size_t... I>
op::Attributes make_attributes(const std::array<double, sizeof...(I)>& values,
                               std::index_sequence<I...>) {
  return op::Attributes{values[I]...};
}

// The FFI call's attributes as op::Attributes: exactly the declared names,
// each a float64 (XLA passes whatever the caller sent, so the handler checks
// the names and types), then the op's own check of their values.
inline std::optional<ffi::Error> check_attributes(const char* op, const ffi::Dictionary& given,
                                                  op::Attributes& attributes) {
  const std::array<double, 0> no_values{};
  bool declared = given.size() == kAttributeCount;
  for (const char* name : op::kAttributeNames) declared = declared && given.contains(name);
  if (!declared) {
    return ffi::Error::InvalidArgument(
        std::string(op) + ": expected the attributes " +
        attribute_list(op::kAttributeNames, no_values) + ", got " +
        attribute_list(given, no_values));
  }
  std::array<double, kAttributeCount> values{};
  std::size_t i = 0;
  for (const char* name : op::kAttributeNames) {
    auto value = given.get<double>(name);
    if (value.has_error()) {
      return ffi::Error::InvalidArgument(std::string(op) + ": attribute " + name + ": " +
                                         value.error().message());
    }
    values[i++] = *value;
  }
  attributes = make_attributes(values, std::make_index_sequence<kAttributeCount>{});
  if (const char* problem = op::attributes_problem(attributes)) {
    return ffi::Error::InvalidArgument(std::string(op) + ": " + problem + ", got " +
                                       attribute_list(op::kAttributeNames, values));
  }
  return std::nullopt;
}

// Everything the forward handlers (CPU and CUDA) check before computing; fills
// in the geometry of x and the attributes.
inline std::optional<ffi::Error> check_forward(const ffi::AnyBuffer& x, const ffi::AnyBuffer& y,
                                               const ffi::AnyBuffer& residual,
                                               const ffi::Dictionary& given,
                                               op::Attributes& attributes, Geometry& geometry) {
  constexpr const char* op = OP_NAME "_forward";
  if (auto error = check_input(op, x, geometry)) return error;
  if (auto error = check_attributes(op, given, attributes)) return error;
  if (auto error = check_same(op, "output y", y, x.element_type(), x.dimensions())) return error;
  return check_residual(op, "output residual", residual, x);
}

// Everything the backward handlers (CPU and CUDA) check before computing.
inline std::optional<ffi::Error> check_backward(const ffi::AnyBuffer& x,
                                                const ffi::AnyBuffer& residual,
                                                const ffi::AnyBuffer& ct, const ffi::AnyBuffer& dx,
                                                const ffi::Dictionary& given,
                                                op::Attributes& attributes, Geometry& geometry) {
  constexpr const char* op = OP_NAME "_backward";
  if (auto error = check_input(op, x, geometry)) return error;
  if (auto error = check_attributes(op, given, attributes)) return error;
  if (auto error = check_residual(op, "input residual", residual, x)) return error;
  if (auto error = check_same(op, "cotangent", ct, x.element_type(), x.dimensions())) {
    return error;
  }
  return check_same(op, "output dx", dx, x.element_type(), x.dimensions());
}

}  // namespace rowwise
