// Keeps C++ exceptions inside the handlers.
//
// XLA calls a handler through a C function (XLA_FFI_DEFINE_HANDLER_SYMBOL
// makes it extern "C") from code built without exceptions: an exception that
// leaves the handler terminates the whole process. Handler code can throw,
// though: std::bad_alloc from any allocation (a std::function, a
// std::make_shared, a message string, ffi::ThreadPool::Schedule), and
// whatever a library it calls throws. Every handler therefore runs its body
// through guarded(), which turns an exception into an ffi::Error; JAX raises
// it in Python as jax.errors.JaxRuntimeError and the process carries on.
#pragma once

#include <exception>
#include <new>
#include <string>

#include "xla/ffi/api/ffi.h"

namespace rowwise {

namespace ffi = xla::ffi;

// The error "<op>: <what>". Building that message allocates, which is what
// just failed after a std::bad_alloc: if it fails again, the error goes out
// with an empty message rather than a second exception.
inline ffi::Error failure(ffi::ErrorCode code, const char* op, const char* what) noexcept {
  try {
    return ffi::Error(code, std::string(op) + ": " + what);
  } catch (...) {
    return ffi::Error(code, std::string());
  }
}

// body() returns an ffi::Error; guarded(op, body) returns the same, or the
// error that an exception thrown by body() maps to. noexcept: nothing escapes.
template <typename Body>
ffi::Error guarded(const char* op, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return failure(ffi::ErrorCode::kResourceExhausted, op, "out of memory");
  } catch (const std::exception& e) {
    return failure(ffi::ErrorCode::kInternal, op, e.what());
  } catch (...) {
    return failure(ffi::ErrorCode::kInternal, op, "unknown C++ exception");
  }
}

}  // namespace rowwise
