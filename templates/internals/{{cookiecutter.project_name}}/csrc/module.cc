// The Python extension module `_ffi`: hands the op's CPU handler to Python as
// a PyCapsule, which ffi_target.py registers with XLA under a target name
// derived from the op's. It holds no Python state; nanobind is only the way
// the capsule gets to Python.
#include <nanobind/nanobind.h>

#include "xla/ffi/api/api.h"

namespace nb = nanobind;

// Defined in the op's handler file, csrc/<op name>_cpu.cc.
XLA_FFI_DECLARE_HANDLER_SYMBOL(OpCpu);

NB_MODULE(_ffi, m) {
  m.doc() = "The op's XLA FFI handler for the CPU, as a PyCapsule.";
  m.def("cpu_handler", [] { return nb::capsule(reinterpret_cast<void*>(OpCpu)); });
}
