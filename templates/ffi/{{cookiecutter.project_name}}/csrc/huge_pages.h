// Optional speed-up for the CPU handlers' outputs: huge pages and
// pre-faulting (run.h uses this file when it exists; delete it and the
// handlers write their outputs with ordinary page faults, and kernel_check.cc
// skips its huge-page checks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace rowwise {

// Outputs from XLA are usually fresh memory: on Linux every page then costs a
// page fault on its first write, which the kernel serves by zeroing the page.
// For a memory-bound op that is most of the time: a (4096, 4096) float32
// output is 64 MiB, 16384 faults of 4 KiB pages, and each fault costs
// microseconds (more in a VM) while faults taken by several threads at once
// hardly scale. Two madvise calls cut that (README.md, "Speed", has the
// measurements):
//
// - HugePagesDuringCall, once per output: transparent huge pages (2 MiB), so
//   one fault maps 512 times as much memory. It covers only whole 2 MiB
//   blocks inside the buffer, is skipped for outputs under kHugeBytes, and is
//   undone when the call returns (see the class for why).
// - prefault_for_writing, once per chunk: one call populates the chunk's
//   output range instead of one fault per page, and runs on each thread.
//
// Both change no data (pages already present are left alone). Where THP is
// disabled, on Linux before 5.14 (no MADV_POPULATE_WRITE) and on other
// systems, nothing happens and writes fault as usual.
inline constexpr std::size_t kHugePage = std::size_t{2} << 20;  // x86-64, and aarch64 with 4 KiB pages
inline constexpr std::size_t kHugeBytes = 2 * kHugePage;
inline constexpr std::size_t kPrefaultBytes = std::size_t{1} << 20;

#if defined(__linux__)
// madvise(advice) on the whole units of `unit` bytes (a power of two, at least
// a page) inside [data, data + bytes): madvise takes page-aligned ranges, and
// the advice must not reach memory beyond this buffer.
inline void madvise_inside(void* data, std::size_t bytes, std::uintptr_t unit, int advice) {
  const auto first = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t begin = (first + unit - 1) / unit * unit;
  const std::uintptr_t end = (first + bytes) / unit * unit;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, advice);
}
#endif

// True where the kernel gives huge pages only to memory advised with
// MADV_HUGEPAGE ("madvise", the default of most distributions). Under
// "always" all memory already gets them, under "never" none can.
inline bool huge_pages_on_request() {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  static const bool on_request = [] {
    std::ifstream file("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string modes;  // e.g. "always [madvise] never": the chosen one in brackets
    std::getline(file, modes);
    return modes.find("[madvise]") != std::string::npos;
  }();
  return on_request;
#else
  return false;
#endif
}

// Asks for huge pages on an output for as long as this object lives: create
// it before the output is written, and let it end with the call.
//
// madvise marks the address range (the kernel's mapping), not the buffer:
// left in place, the advice would outlive the output and apply to whatever
// XLA's allocator puts at those addresses next (with glibc, the small and
// mid-sized allocations that reuse freed heap memory), committing their
// memory in 2 MiB blocks. So the destructor undoes it with MADV_NOHUGEPAGE:
// the output's pages, already faulted in, stay huge; later faults there get
// 4 KiB pages, as on memory nobody advised. That is the default only where
// huge pages come on request, so nothing is advised elsewhere: under
// "always", MADV_NOHUGEPAGE would take huge pages away from that memory.
// (One side effect remains: memory that something else had advised, e.g.
// glibc's heap under GLIBC_TUNABLES=glibc.malloc.hugetlb=1, loses that
// advice where an output lay.)
class HugePagesDuringCall {
 public:
  HugePagesDuringCall(void* data, std::size_t bytes) : data_(data), bytes_(bytes) {
    advised_ = bytes >= kHugeBytes && huge_pages_on_request();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (advised_) madvise_inside(data_, bytes_, kHugePage, MADV_HUGEPAGE);
#endif
  }
  ~HugePagesDuringCall() {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (advised_) madvise_inside(data_, bytes_, kHugePage, MADV_NOHUGEPAGE);
#endif
  }
  HugePagesDuringCall(const HugePagesDuringCall&) = delete;
  HugePagesDuringCall& operator=(const HugePagesDuringCall&) = delete;

 private:
  void* data_;
  std::size_t bytes_;
  bool advised_;
};

inline void prefault_for_writing(void* data, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
  if (bytes < kPrefaultBytes) return;
  madvise_inside(data, bytes, static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE)),
                 MADV_POPULATE_WRITE);
#else
  (void)data;
  (void)bytes;
#endif
}

}  // namespace rowwise
