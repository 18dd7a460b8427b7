// The Python extension module `_ffi`: hands the handler to Python as a
// PyCapsule, which jax.ffi.register_ffi_target registers with XLA. It holds
// no Python state; nanobind is only the way the capsule gets to Python.
#include <nanobind/nanobind.h>

#include "xla/ffi/api/api.h"

namespace nb = nanobind;

XLA_FFI_DECLARE_HANDLER_SYMBOL(TridiagonalMatvecCpu);

NB_MODULE(_ffi, m) {
  m.doc() = "The XLA FFI handler of the tridiagonal matrix-vector product, as a PyCapsule.";
  m.def("cpu_targets", [] {
    nb::dict targets;
    targets["tridiagonal_matvec"] = nb::capsule(reinterpret_cast<void*>(TridiagonalMatvecCpu));
    return targets;
  });
}
