// Row-wise log-sum-exp as a pair of typed XLA FFI handlers (forward and
// backward) for the CPU, in one self-contained C++17 file.
//
//   forward:  x (..., n) float32|float64  ->  lse (...)    = log(sum_j exp(x[..., j]))
//   backward: x, lse, g (...)             ->  dx (..., n)  = g[..., None] * exp(x - lse[..., None])
//
// exp(x - lse) is softmax(x): the backward reuses the forward's lse instead of
// recomputing the row sums. logsumexp.py compiles this file with
// the system compiler, loads it with ctypes and registers the two exported
// symbols (LogSumExpForward, LogSumExpBackward) as XLA custom-call targets:
//
//   JAX_INCLUDE=$(python -c 'import jax; print(jax.ffi.include_dir())')
//   c++ -O3 -std=c++17 -shared -fPIC -isystem "$JAX_INCLUDE" logsumexp.cc -o lib.so
//
// Only the header-only xla/ffi/api/ffi.h is needed: nothing is linked against
// jaxlib, and no nanobind: the symbols are plain extern "C" functions that
// Python wraps in PyCapsules (jax.ffi.pycapsule).
//
// Single-threaded on purpose, to stay short; the cookiecutter `ffi` template
// shows how to split rows over XLA's intra-op pool (ffi::ThreadPool) and how
// to add a CUDA handler.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace logsumexp {
namespace {

constexpr const char* kForwardOp = "logsumexp_fwd";
constexpr const char* kBackwardOp = "logsumexp_bwd";

// ---------------------------------------------------------------------------
// Validation.
//
// XLA checks nothing about the buffers beyond what the binding declares (that
// there are so many buffers and attributes of the declared kinds). In
// particular the result shapes and dtypes are whatever the Python caller wrote
// in ffi_call's result_shape_dtypes: a wrong declaration is NOT an error
// anywhere else, and a handler that trusted it would read or write out of
// bounds. So every buffer is checked here against x, and a failure is returned
// as ffi::Error::InvalidArgument, which JAX raises in Python as
// jax.errors.JaxRuntimeError with this message (the process stays usable).
// ---------------------------------------------------------------------------

std::string DtypeName(ffi::DataType dtype) {
  switch (dtype) {
    case ffi::DataType::F32: return "float32";
    case ffi::DataType::F64: return "float64";
    case ffi::DataType::F16: return "float16";
    case ffi::DataType::BF16: return "bfloat16";
    case ffi::DataType::S32: return "int32";
    case ffi::DataType::S64: return "int64";
    case ffi::DataType::PRED: return "bool";
    case ffi::DataType::C64: return "complex64";
    case ffi::DataType::C128: return "complex128";
    default: return "XLA type #" + std::to_string(static_cast<int>(dtype));
  }
}

std::string ShapeString(ffi::AnyBuffer::Dimensions dims) {
  std::string s = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    s += (i ? ", " : "") + std::to_string(dims[i]);
  }
  return s + (dims.size() == 1 ? ",)" : ")");
}

std::optional<ffi::Error> Invalid(const char* op, const std::string& problem) {
  return ffi::Error::InvalidArgument(std::string(op) + ": " + problem);
}

// x as a matrix: every index before the last axis is a row of `cols` elements.
struct Geometry {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

std::optional<ffi::Error> CheckInput(const char* op, const ffi::AnyBuffer& x, Geometry& g) {
  const auto dims = x.dimensions();
  if (dims.size() < 1) {
    return Invalid(op, "x must have rank >= 1 (log-sum-exp reduces the last axis), got a scalar");
  }
  const ffi::DataType dtype = x.element_type();
  if (dtype != ffi::DataType::F32 && dtype != ffi::DataType::F64) {
    return Invalid(op, "unsupported dtype " + DtypeName(dtype) + "; expected float32 or float64");
  }
  if (dims.back() == 0) {
    return Invalid(op, "x has rows of length 0 (shape " + ShapeString(dims) +
                           "); log-sum-exp of an empty row is -inf and its gradient undefined");
  }
  // Zero rows (a leading axis of length 0) is fine: there is nothing to do.
  // XLA does not even call a handler whose results are all empty.
  g.cols = dims.back();
  g.rows = static_cast<std::int64_t>(x.element_count()) / g.cols;
  return std::nullopt;
}

// `buffer` must have exactly the dtype and dimensions given.
std::optional<ffi::Error> CheckSame(const char* op, const char* what,
                                    const ffi::AnyBuffer& buffer, ffi::DataType dtype,
                                    ffi::AnyBuffer::Dimensions dims) {
  if (buffer.element_type() != dtype) {
    return Invalid(op, std::string(what) + " has dtype " + DtypeName(buffer.element_type()) +
                           ", expected " + DtypeName(dtype));
  }
  const auto got = buffer.dimensions();
  bool same = got.size() == dims.size();
  for (std::size_t i = 0; same && i < dims.size(); ++i) same = got[i] == dims[i];
  if (!same) {
    return Invalid(op, std::string(what) + " has shape " + ShapeString(got) + ", expected " +
                           ShapeString(dims));
  }
  return std::nullopt;
}

// Per-row buffers (lse, its cotangent) have x's shape without the last axis.
std::optional<ffi::Error> CheckPerRow(const char* op, const char* what,
                                      const ffi::AnyBuffer& buffer, const ffi::AnyBuffer& x) {
  const auto dims = x.dimensions();
  return CheckSame(op, what, buffer, x.element_type(), dims.first(dims.size() - 1));
}

// ---------------------------------------------------------------------------
// Kernels. Sums and exponentials run in double for both dtypes: a float32
// running sum over a long row loses about log2(n) bits, and double costs
// little next to the memory traffic of this op.
// ---------------------------------------------------------------------------

template <typename T>
void Forward(const T* x, T* lse, Geometry g) {
  for (std::int64_t r = 0; r < g.rows; ++r) {
    const T* row = x + r * g.cols;
    // Subtract the row max before exp so that large logits do not overflow.
    // A non-finite max (all -inf, or a +inf entry) is replaced by 0, as
    // jax.nn.logsumexp does: all -inf gives -inf, a +inf entry gives +inf,
    // and a NaN anywhere in the row gives NaN (exp(NaN) poisons the sum).
    double m = static_cast<double>(*std::max_element(row, row + g.cols));
    if (!std::isfinite(m)) m = 0.0;
    double sum = 0.0;
    for (std::int64_t j = 0; j < g.cols; ++j) sum += std::exp(static_cast<double>(row[j]) - m);
    lse[r] = static_cast<T>(m + std::log(sum));
  }
}

template <typename T>
void Backward(const T* x, const T* lse, const T* ct, T* dx, Geometry g) {
  for (std::int64_t r = 0; r < g.rows; ++r) {
    const T* row = x + r * g.cols;
    T* out = dx + r * g.cols;
    const double l = static_cast<double>(lse[r]);
    const double c = static_cast<double>(ct[r]);
    // d lse / d x_j = exp(x_j - lse) = softmax(x)_j. Masked (-inf) entries
    // get exactly 0.
    for (std::int64_t j = 0; j < g.cols; ++j) {
      out[j] = static_cast<T>(c * std::exp(static_cast<double>(row[j]) - l));
    }
  }
}

// ---------------------------------------------------------------------------
// Handlers. Buffers arrive as ffi::AnyBuffer (dtype known only at run time)
// and each handler dispatches on x's element type, so one registered target
// serves float32 and float64. (A typed ffi::Buffer<ffi::F32> would make XLA
// reject other dtypes before the call, at the price of one target per dtype.)
// ---------------------------------------------------------------------------

ffi::Error ForwardImpl(ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> lse) {
  Geometry g;
  if (auto error = CheckInput(kForwardOp, x, g)) return *error;
  if (auto error = CheckPerRow(kForwardOp, "output lse", *lse, x)) return *error;
  switch (x.element_type()) {
    case ffi::DataType::F32:
      Forward(x.typed_data<float>(), lse->typed_data<float>(), g);
      break;
    case ffi::DataType::F64:
      Forward(x.typed_data<double>(), lse->typed_data<double>(), g);
      break;
    default:
      return ffi::Error::Internal(std::string(kForwardOp) +
                                  ": dtype passed the checks but has no kernel");
  }
  return ffi::Error::Success();
}

ffi::Error BackwardImpl(ffi::AnyBuffer x, ffi::AnyBuffer lse, ffi::AnyBuffer ct,
                        ffi::Result<ffi::AnyBuffer> dx) {
  Geometry g;
  if (auto error = CheckInput(kBackwardOp, x, g)) return *error;
  if (auto error = CheckPerRow(kBackwardOp, "input lse", lse, x)) return *error;
  if (auto error = CheckPerRow(kBackwardOp, "cotangent", ct, x)) return *error;
  if (auto error = CheckSame(kBackwardOp, "output dx", *dx, x.element_type(), x.dimensions())) {
    return *error;
  }
  switch (x.element_type()) {
    case ffi::DataType::F32:
      Backward(x.typed_data<float>(), lse.typed_data<float>(), ct.typed_data<float>(),
               dx->typed_data<float>(), g);
      break;
    case ffi::DataType::F64:
      Backward(x.typed_data<double>(), lse.typed_data<double>(), ct.typed_data<double>(),
               dx->typed_data<double>(), g);
      break;
    default:
      return ffi::Error::Internal(std::string(kBackwardOp) +
                                  ": dtype passed the checks but has no kernel");
  }
  return ffi::Error::Success();
}

}  // namespace
}  // namespace logsumexp

// ---------------------------------------------------------------------------
// Exported symbols.
//
// XLA_FFI_DEFINE_HANDLER_SYMBOL defines an extern "C" function
// `XLA_FFI_Error* Name(XLA_FFI_CallFrame*)`, the C ABI XLA calls. The binding
// (ffi::Ffi::Bind()...) declares what the call frame holds, in order: Arg<>
// for each operand of ffi_call, Ret<> for each declared result, Attr<T>("name")
// for each keyword attribute, Ctx<> for runtime context (e.g.
// ffi::ThreadPool). XLA decodes the call frame against the binding before the
// handler runs, so a missing operand or attribute is an error there, not a
// crash here.
//
// Attributes are typed, and decoding is exact: an Attr<float>("eps") must be
// passed from Python as np.float32(eps) (a Python float arrives as F64 and
// fails with "Wrong scalar data type: expected F32 but got F64"). They are
// compile-time constants of the call, so they cannot be traced values. To add
// one: `.Attr<double>("temperature")` here, a `double temperature` parameter
// at the same position in the Impl function, and
// `call(x, temperature=np.float64(t))` in Python.
// ---------------------------------------------------------------------------

XLA_FFI_DEFINE_HANDLER_SYMBOL(LogSumExpForward, logsumexp::ForwardImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::AnyBuffer>()   // x (..., n)
                                  .Ret<ffi::AnyBuffer>());  // lse (...)

XLA_FFI_DEFINE_HANDLER_SYMBOL(LogSumExpBackward, logsumexp::BackwardImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::AnyBuffer>()   // x (..., n)
                                  .Arg<ffi::AnyBuffer>()   // lse (...), from the forward
                                  .Arg<ffi::AnyBuffer>()   // cotangent of lse (...)
                                  .Ret<ffi::AnyBuffer>());  // dx (..., n)
