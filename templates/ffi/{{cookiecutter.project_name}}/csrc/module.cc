// The Python extension module `_ffi`: hands the handlers to Python as
// PyCapsules, which jax.ffi.register_ffi_target registers with XLA under
// "<package>_<op>_forward" and "_backward". It holds no Python state; nanobind
// is only the way the capsules get to Python.
#include <nanobind/nanobind.h>

#include "op.h"
#include "xla/ffi/api/api.h"

namespace nb = nanobind;

XLA_FFI_DECLARE_HANDLER_SYMBOL(RowwiseForwardCpu);
XLA_FFI_DECLARE_HANDLER_SYMBOL(RowwiseBackwardCpu);
#ifdef ROWWISE_WITH_CUDA
XLA_FFI_DECLARE_HANDLER_SYMBOL(RowwiseForwardCuda);
XLA_FFI_DECLARE_HANDLER_SYMBOL(RowwiseBackwardCuda);
#endif

namespace {

template <typename Fn>
nb::capsule capsule(Fn* fn) {
  return nb::capsule(reinterpret_cast<void*>(fn));
}

}  // namespace

NB_MODULE(_ffi, m) {
  m.doc() = "XLA FFI handlers for the op " OP_NAME ", as PyCapsules.";
  m.attr("op_name") = OP_NAME;
  // The kernel file's declaration, which rowwise.py builds the FFI calls from:
  // the attributes' names, and whether a row must be whole on one device.
  nb::list attributes;
  for (const char* name : rowwise::op::kAttributeNames) attributes.append(name);
  m.attr("attributes") = attributes;
  m.attr("needs_whole_rows") = rowwise::op::kNeedsWholeRows;
  m.def("cpu_targets", [] {
    nb::dict targets;
    targets["forward"] = capsule(RowwiseForwardCpu);
    targets["backward"] = capsule(RowwiseBackwardCpu);
    return targets;
  });
  // Empty when the module was built without the CUDA toolkit.
  m.def("cuda_targets", [] {
    nb::dict targets;
#ifdef ROWWISE_WITH_CUDA
    targets["forward"] = capsule(RowwiseForwardCuda);
    targets["backward"] = capsule(RowwiseBackwardCuda);
#endif
    return targets;
  });
}
