// The Python extension module `_tridiagonal_ffi`: hands the handler to Python
// as a PyCapsule, which jax.ffi.register_ffi_target registers with XLA.
// nanobind is only the way the capsule gets to Python; no Python state here.
#include <nanobind/nanobind.h>

#include "xla/ffi/api/api.h"

namespace nb = nanobind;

XLA_FFI_DECLARE_HANDLER_SYMBOL(TridiagonalSolveCpu);

NB_MODULE(_tridiagonal_ffi, m) {
  m.doc() = "XLA FFI handler for batched tridiagonal solves (Thomas algorithm), as a PyCapsule.";
  m.def("cpu_handlers", [] {
    nb::dict handlers;
    handlers["tridiagonal_solve"] = nb::capsule(reinterpret_cast<void*>(TridiagonalSolveCpu));
    return handlers;
  });
}
