// RMS normalization over the last axis, as two XLA FFI handlers (float32, CPU), and the
// nanobind module _rms_norm_ffi that hands them to Python as PyCapsules.
//
//   forward:  r = 1 / sqrt(mean(x^2) + eps) per row,  y = x * r * w     -> (y, r)
//   backward: x_hat = x * r, g = dy * w,
//             dx = r * (g - x_hat * mean(g * x_hat)),  dw = sum over rows of dy * x_hat
//
// x has any leading axes (all of them count as rows); w is (d,). Sums accumulate in double.
// Single-threaded: the FFI template's csrc/rms_norm_parallel.h shows how to spread rows over
// XLA's thread pool.
#include <cmath>
#include <cstdint>
#include <vector>

#include <nanobind/nanobind.h>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using F32 = ffi::Buffer<ffi::F32>;

// Rows and features of x, after checking that w and every other buffer fit it. XLA only
// checks the element type; a wrong shape would read or write out of bounds.
ffi::Error geometry(const F32& x, const F32& w, std::int64_t& rows, std::int64_t& d) {
  auto dims = x.dimensions();
  if (dims.size() < 1) return ffi::Error::InvalidArgument("rms_norm: x must have an axis");
  d = dims.back();
  rows = d == 0 ? 0 : static_cast<std::int64_t>(x.element_count()) / d;
  if (w.dimensions().size() != 1 || w.dimensions()[0] != d) {
    return ffi::Error::InvalidArgument("rms_norm: w must have shape (d,), d = x.shape[-1]");
  }
  return ffi::Error::Success();
}

ffi::Error Forward(F32 x, F32 w, ffi::ResultBuffer<ffi::F32> y, ffi::ResultBuffer<ffi::F32> r,
                   float eps) {
  std::int64_t rows, d;
  if (auto error = geometry(x, w, rows, d); error.failure()) return error;
  if (y->element_count() != x.element_count() || r->element_count() != static_cast<size_t>(rows)) {
    return ffi::Error::InvalidArgument("rms_norm: results must have shapes x.shape, x.shape[:-1]");
  }
  const float* xp = x.typed_data();
  const float* wp = w.typed_data();
  for (std::int64_t i = 0; i < rows; ++i) {
    const float* row = xp + i * d;
    double sum = 0.0;
    for (std::int64_t j = 0; j < d; ++j) sum += static_cast<double>(row[j]) * row[j];
    const float ri = static_cast<float>(1.0 / std::sqrt(sum / d + eps));
    r->typed_data()[i] = ri;
    float* out = y->typed_data() + i * d;
    for (std::int64_t j = 0; j < d; ++j) out[j] = row[j] * ri * wp[j];
  }
  return ffi::Error::Success();
}

ffi::Error Backward(F32 x, F32 w, F32 r, F32 dy, ffi::ResultBuffer<ffi::F32> dx,
                    ffi::ResultBuffer<ffi::F32> dw) {
  std::int64_t rows, d;
  if (auto error = geometry(x, w, rows, d); error.failure()) return error;
  if (r.element_count() != static_cast<size_t>(rows) || dy.element_count() != x.element_count() ||
      dx->element_count() != x.element_count() || dw->element_count() != static_cast<size_t>(d)) {
    return ffi::Error::InvalidArgument("rms_norm_bwd: operand or result shapes do not fit x");
  }
  const float* wp = w.typed_data();
  std::vector<double> dw_sum(d, 0.0);
  for (std::int64_t i = 0; i < rows; ++i) {
    const float* xr = x.typed_data() + i * d;
    const float* gr = dy.typed_data() + i * d;
    const double ri = r.typed_data()[i];
    double dot = 0.0;  // sum of g * x_hat over the row
    for (std::int64_t j = 0; j < d; ++j) {
      dot += static_cast<double>(gr[j]) * wp[j] * xr[j] * ri;
      dw_sum[j] += static_cast<double>(gr[j]) * xr[j] * ri;
    }
    const double c = ri * dot / d;
    float* out = dx->typed_data() + i * d;
    for (std::int64_t j = 0; j < d; ++j) {
      out[j] = static_cast<float>(ri * gr[j] * wp[j] - c * xr[j] * ri);
    }
  }
  for (std::int64_t j = 0; j < d; ++j) dw->typed_data()[j] = static_cast<float>(dw_sum[j]);
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(RmsNormForward, Forward,
                              ffi::Ffi::Bind()
                                  .Arg<F32>()                   // x
                                  .Arg<F32>()                   // w
                                  .Ret<F32>()                   // y
                                  .Ret<F32>()                   // r, one per row
                                  .Attr<float>("eps"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(RmsNormBackward, Backward,
                              ffi::Ffi::Bind()
                                  .Arg<F32>()    // x
                                  .Arg<F32>()    // w
                                  .Arg<F32>()    // r from the forward
                                  .Arg<F32>()    // dy
                                  .Ret<F32>()    // dx
                                  .Ret<F32>());  // dw

NB_MODULE(_rms_norm_ffi, m) {
  m.def("handlers", [] {
    nanobind::dict handlers;
    handlers["forward"] = nanobind::capsule(reinterpret_cast<void*>(RmsNormForward));
    handlers["backward"] = nanobind::capsule(reinterpret_cast<void*>(RmsNormBackward));
    return handlers;
  });
}
