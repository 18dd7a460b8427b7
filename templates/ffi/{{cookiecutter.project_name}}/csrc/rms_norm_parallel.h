// Split rows into chunks and run them on a thread pool and the calling thread.
//
// `Pool` is anything with Schedule(callable) and num_threads(): the handlers
// pass XLA's intra-op pool (ffi::ThreadPool); kernel_check.cc passes a pool of
// std::threads, so this code also runs under the sanitizers outside XLA.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace rms_norm {

// Inputs under kGrain elements run on the calling thread alone, since
// handing work to a pool costs microseconds.
inline constexpr std::int64_t kGrain = 1 << 16;
// Chunks per worker: a few, so that a worker that starts late (the pool is
// shared with XLA) still gets a share, yet each chunk is a long contiguous
// run of rows. Fine interleaving is slower: threads that write fresh output
// pages side by side contend for the kernel's page-table locks.
inline constexpr std::int64_t kChunksPerWorker = 4;

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

struct ChunkState {
  ChunkState(std::function<void(std::int64_t, std::int64_t)> body, std::int64_t rows,
             std::int64_t chunk, std::int64_t chunks)
      : body(std::move(body)), rows(rows), chunk(chunk), chunks(chunks) {}

  const std::function<void(std::int64_t, std::int64_t)> body;
  const std::int64_t rows, chunk, chunks;
  std::atomic<std::int64_t> next{0};
  std::atomic<std::int64_t> done{0};
  std::mutex mutex;
  std::condition_variable all_done;
};

// Takes chunks until none is left. noexcept: it runs on pool threads, where
// nothing could catch an exception, so `body` must not throw.
inline void run_chunks(ChunkState& state) noexcept {
  for (std::int64_t c; (c = state.next.fetch_add(1)) < state.chunks;) {
    const std::int64_t begin = c * state.chunk;
    state.body(begin, std::min(state.rows, begin + state.chunk));
    if (state.done.fetch_add(1) + 1 == state.chunks) {
      std::lock_guard<std::mutex> lock(state.mutex);
      state.all_done.notify_all();
    }
  }
}

// noexcept: once a task may be running, unwinding out of parallel_rows would
// return while that task still writes to the output (XLA frees or reuses it
// as soon as the handler returns); terminating is the lesser evil.
inline void wait_for_all_chunks(ChunkState& state) noexcept {
  std::unique_lock<std::mutex> lock(state.mutex);
  state.all_done.wait(lock, [&] { return state.done.load() == state.chunks; });
}

// Runs body(begin, end) over [0, rows) and returns when every row is done.
//
// The pool's threads plus the calling thread share the chunks; the caller
// counts as one of the pool's num_threads() workers, so the machine is not
// oversubscribed. The caller takes chunks too and waits only for chunks that
// a pool thread has already started, so this cannot deadlock when the pool is
// busy or when the caller is itself a pool thread. A pool task that starts
// after the last chunk was taken finds nothing to do; the state it reads is
// shared, so it outlives this call.
//
// Exceptions: the allocations that can throw std::bad_alloc (the shared
// state, and `body` as a std::function at the call site) happen before any
// task is scheduled, so the handler's guard (rms_norm_guard.h) can turn them
// into an error with nothing left running. A pool that cannot take a task
// (ffi::ThreadPool::Schedule allocates one, a pool that starts threads may
// fail to) only means less help: the calling thread does the chunks nobody
// else took.
template <typename Pool>
void parallel_rows(Pool& pool, std::int64_t rows, std::int64_t cols,
                   std::function<void(std::int64_t, std::int64_t)> body) {
  const std::int64_t workers = std::max<std::int64_t>(1, pool.num_threads());
  const std::int64_t min_rows = std::max<std::int64_t>(1, kGrain / std::max<std::int64_t>(cols, 1));
  const std::int64_t chunk =
      std::max(min_rows, (rows + workers * kChunksPerWorker - 1) / (workers * kChunksPerWorker));
  const std::int64_t chunks = (rows + chunk - 1) / chunk;
  const std::int64_t helpers = std::min(workers - 1, chunks - 1);
  if (helpers <= 0) {
    body(0, rows);
    return;
  }
  auto state = std::make_shared<ChunkState>(std::move(body), rows, chunk, chunks);
  for (std::int64_t i = 0; i < helpers; ++i) {
    try {
      pool.Schedule([state] { run_chunks(*state); });
    } catch (...) {
      break;  // no more help: the chunks stay for the threads already asked
    }
  }
  run_chunks(*state);
  wait_for_all_chunks(*state);
}

}  // namespace rms_norm
