// The XLA FFI handler: a batch of tridiagonal systems, one Thomas solve each.
//
// Every operand has shape (..., n); the leading axes are a batch of
// independent systems stored one after another (row-major), so system k is
// the n elements starting at k * n of each buffer. Blocks of up to kLanes
// systems are solved side by side (thomas_block.h), a last 1 to 3 one at a
// time (thomas.h); single-threaded. One handler serves float32 and float64: the
// operands arrive as ffi::AnyBuffer and it dispatches on the element type.
//
// XLA checks nothing for us: the FFI hands over whatever buffers the caller
// declared, and a wrong declared result shape is not an error anywhere else.
// So the handler checks every operand and the result before it touches
// memory, and refuses with an InvalidArgument error that names the problem;
// JAX raises it in Python as jax.errors.JaxRuntimeError.
#include <algorithm>
#include <cstdint>
#include <new>
#include <string>
#include <vector>

#include "thomas.h"
#include "thomas_block.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace tridiagonal {
namespace {

constexpr const char* kOp = "tridiagonal_solve";

std::string dtype_name(ffi::DataType dtype) {
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

std::string shape_string(ffi::AnyBuffer::Dimensions dims) {
  std::string s = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + (dims.size() == 1 ? ",)" : ")");
}

ffi::Error invalid(const std::string& message) {
  return ffi::Error::InvalidArgument(std::string(kOp) + ": " + message);
}

// `buffer` must have d's dtype and shape.
ffi::Error check_like_d(const char* what, const ffi::AnyBuffer& buffer, const ffi::AnyBuffer& d) {
  if (buffer.element_type() != d.element_type()) {
    return invalid(std::string(what) + " has dtype " + dtype_name(buffer.element_type()) +
                   ", expected " + dtype_name(d.element_type()) + " like d");
  }
  const auto got = buffer.dimensions(), want = d.dimensions();
  bool same = got.size() == want.size();
  for (std::size_t i = 0; same && i < want.size(); ++i) same = got[i] == want[i];
  if (!same) {
    return invalid(std::string(what) + " has shape " + shape_string(got) + ", expected " +
                   shape_string(want) + " like d");
  }
  return ffi::Error::Success();
}

template <typename T>
void solve_all(const ffi::AnyBuffer& dl, const ffi::AnyBuffer& d, const ffi::AnyBuffer& du,
               const ffi::AnyBuffer& b, ffi::AnyBuffer& x, std::int64_t systems, std::int64_t n) {
  const T* dlp = static_cast<const T*>(dl.untyped_data());
  const T* dp = static_cast<const T*>(d.untyped_data());
  const T* dup = static_cast<const T*>(du.untyped_data());
  const T* bp = static_cast<const T*>(b.untyped_data());
  T* xp = static_cast<T*>(x.untyped_data());
  // Blocks of up to kLanes systems side by side; a last few one at a time.
  std::int64_t k = 0;
  if (systems >= kMinLanesForBlock) {
    ThomasBlock<T> block(n);
    while (systems - k >= kMinLanesForBlock) {
      const std::int64_t at = k * n, lanes = std::min(kLanes, systems - k);
      block.solve(dlp + at, dp + at, dup + at, bp + at, xp + at, lanes);
      k += lanes;
    }
  }
  std::vector<T> upper(n);
  for (; k < systems; ++k) {
    const std::int64_t at = k * n;
    thomas_solve(dlp + at, dp + at, dup + at, bp + at, xp + at, upper.data(), n);
  }
}

ffi::Error SolveImpl(ffi::AnyBuffer dl, ffi::AnyBuffer d, ffi::AnyBuffer du, ffi::AnyBuffer b,
                     ffi::Result<ffi::AnyBuffer> x) {
  const auto dims = d.dimensions();
  if (dims.size() < 1) {
    return invalid("d must have rank >= 1 (shape (..., n), one system per leading index), got a "
                   "scalar");
  }
  const ffi::DataType dtype = d.element_type();
  if (dtype != ffi::DataType::F32 && dtype != ffi::DataType::F64) {
    return invalid("unsupported dtype " + dtype_name(dtype) + "; expected float32 or float64");
  }
  const std::int64_t n = dims.back();
  if (n < 1) {
    return invalid("systems of size 0 (d has shape " + shape_string(dims) +
                   "); the last axis must have length >= 1");
  }
  if (auto error = check_like_d("dl", dl, d); error.failure()) return error;
  if (auto error = check_like_d("du", du, d); error.failure()) return error;
  if (auto error = check_like_d("b", b, d); error.failure()) return error;
  if (auto error = check_like_d("result x", *x, d); error.failure()) return error;
  const std::int64_t systems = static_cast<std::int64_t>(d.element_count()) / n;
  // A zero pivot is not an error: that system's x is NaN (see thomas.h).
  try {
    if (dtype == ffi::DataType::F32) {
      solve_all<float>(dl, d, du, b, *x, systems, n);
    } else {
      solve_all<double>(dl, d, du, b, *x, systems, n);
    }
  } catch (const std::bad_alloc&) {
    // An exception must not cross into XLA (it would end the process).
    return ffi::Error(ffi::ErrorCode::kResourceExhausted,
                      std::string(kOp) + ": out of memory for the scratch of a block of " +
                          std::to_string(kLanes) + " systems of size " + std::to_string(n));
  }
  return ffi::Error::Success();
}

}  // namespace
}  // namespace tridiagonal

// The symbol module.cc wraps in a capsule. The binding declares what XLA
// passes in; XLA decodes the call frame against it before the handler runs.
XLA_FFI_DEFINE_HANDLER_SYMBOL(TridiagonalSolveCpu, tridiagonal::SolveImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::AnyBuffer>()   // dl: lower diagonal, dl[..., 0] ignored
                                  .Arg<ffi::AnyBuffer>()   // d: diagonal
                                  .Arg<ffi::AnyBuffer>()   // du: upper diagonal, du[..., -1] ignored
                                  .Arg<ffi::AnyBuffer>()   // b: right-hand side
                                  .Ret<ffi::AnyBuffer>());  // x: solution
