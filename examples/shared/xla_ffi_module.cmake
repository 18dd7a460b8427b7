# What examples/ffi and examples/ladder (its FFI rung) build alike: a nanobind extension
# module holding XLA FFI handlers. Each one's CMakeLists.txt includes this file, which finds
# what the build needs, and then declares its module:
#
#   xla_ffi_module(<module> <install destination: empty, no install rule> <sources>...)
#
# Included, not add_subdirectory'd: it runs in the example's own scope, so the paths below
# (csrc/) and the standalone test are the example's.

if(CMAKE_SOURCE_DIR STREQUAL CMAKE_CURRENT_SOURCE_DIR AND NOT CMAKE_BUILD_TYPE
   AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release)  # standalone: an optimised build by default
endif()

# The parent may have found Python and nanobind already; finding them twice
# is harmless but slow and noisy.
if(NOT TARGET Python::Module)
  find_package(Python 3.11 REQUIRED COMPONENTS Interpreter Development.Module)
endif()

# The XLA FFI headers ship with jaxlib; ask the JAX that builds us where.
execute_process(
  COMMAND "${Python_EXECUTABLE}" -c "import jax.ffi; print(jax.ffi.include_dir())"
  OUTPUT_VARIABLE XLA_FFI_INCLUDE_DIR
  OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE _jax_status)
if(NOT _jax_status EQUAL 0 OR NOT EXISTS "${XLA_FFI_INCLUDE_DIR}/xla/ffi/api/ffi.h")
  message(FATAL_ERROR "jax.ffi.include_dir() failed with ${Python_EXECUTABLE}; "
                      "install jax in the build environment")
endif()
message(STATUS "XLA FFI headers: ${XLA_FFI_INCLUDE_DIR}")

if(NOT COMMAND nanobind_add_module)
  execute_process(
    COMMAND "${Python_EXECUTABLE}" -m nanobind --cmake_dir
    OUTPUT_VARIABLE nanobind_ROOT
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  find_package(nanobind CONFIG REQUIRED)
endif()

function(xla_ffi_module name destination)
  nanobind_add_module(${name} NB_STATIC NOMINSIZE ${ARGN})
  set_target_properties(${name} PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
  # SYSTEM: warnings in the XLA headers are not ours to fix.
  target_include_directories(${name} SYSTEM PRIVATE "${XLA_FFI_INCLUDE_DIR}")
  target_include_directories(${name} PRIVATE csrc)
  # Portable flags only (no -march=native), so a wheel built here runs anywhere.
  target_compile_options(${name} PRIVATE $<$<CONFIG:Release,RelWithDebInfo>:-O3> -Wall -Wextra)
  if(destination)
    install(TARGETS ${name} LIBRARY DESTINATION "${destination}")
  endif()
endfunction()
