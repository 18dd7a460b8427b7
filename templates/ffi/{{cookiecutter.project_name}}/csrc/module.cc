// The Python extension module `_ffi`: hands the handlers to Python as
// PyCapsules, which jax.ffi.register_ffi_target registers with XLA. It holds
// no Python state; nanobind is only the way the capsules get to Python.
#include <nanobind/nanobind.h>

#include "xla/ffi/api/api.h"

namespace nb = nanobind;

XLA_FFI_DECLARE_HANDLER_SYMBOL(RmsNormForwardCpu);
XLA_FFI_DECLARE_HANDLER_SYMBOL(RmsNormBackwardCpu);
#ifdef RMS_NORM_WITH_CUDA
XLA_FFI_DECLARE_HANDLER_SYMBOL(RmsNormForwardCuda);
XLA_FFI_DECLARE_HANDLER_SYMBOL(RmsNormBackwardCuda);
#endif

namespace {

template <typename Fn>
nb::capsule capsule(Fn* fn) {
  return nb::capsule(reinterpret_cast<void*>(fn));
}

}  // namespace

NB_MODULE(_ffi, m) {
  m.doc() = "XLA FFI handlers for RMS normalisation, as PyCapsules.";
  m.def("cpu_targets", [] {
    nb::dict targets;
    targets["rms_norm_fwd"] = capsule(RmsNormForwardCpu);
    targets["rms_norm_bwd"] = capsule(RmsNormBackwardCpu);
    return targets;
  });
  // Empty when the module was built without the CUDA toolkit.
  m.def("cuda_targets", [] {
    nb::dict targets;
#ifdef RMS_NORM_WITH_CUDA
    targets["rms_norm_fwd"] = capsule(RmsNormForwardCuda);
    targets["rms_norm_bwd"] = capsule(RmsNormBackwardCuda);
#endif
    return targets;
  });
}
