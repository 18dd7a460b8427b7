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
#include <functional>
#include <memory>
#include <mutex>
#include <utility>

namespace rowwise {

// Inputs under kGrain elements run on the calling thread alone, since
// handing work to a pool costs microseconds.
inline constexpr std::int64_t kGrain = 1 << 16;
// Chunks per worker: a few, so that a worker that starts late (the pool is
// shared with XLA) still gets a share, yet each chunk is a long contiguous
// run of rows. Fine interleaving is slower: threads that write fresh output
// pages side by side contend for the kernel's page-table locks.
inline constexpr std::int64_t kChunksPerWorker = 4;

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
// task is scheduled, so the handler's guard (guard.h) can turn them
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

}  // namespace rowwise
