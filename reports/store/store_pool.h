// StorePool: a few Store connections shared by many threads, each call
// borrowing one for itself alone. A `dfarm node` holds one for its device
// workers (--connections): hundreds of devices a farm need not mean hundreds
// of PostgreSQL backends, nor all of them queue for one connection.
//
//   store::StorePool pool([url] { return store::OpenStore(url); }, 2);
//   auto held = pool.Call(&store::Store::ClaimJob, node, device, lease_s);
//   auto done = pool.Call([&](store::Store& s) { return s.RecordJobResult(id, outcome); });
//
// - A call holds its connection from start to end and nobody else's: every
//   Store method is one transaction (or none), so a transaction stays on one
//   connection and two threads' writes never interleave on one.
// - At most `size` connections exist at once; they open when first needed
//   and stay open. Threads that find all of them busy wait, first come first
//   served.
// - A store whose connection was lost (Store::ConnectionLost after a call) is
//   closed; the next call that needs one opens a new one. A failed open is
//   that call's error.
// - A call made inside another call on the same thread would wait for
//   itself: a programmer's error, which aborts.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include "agent/base/result.h"
#include "reports/store/store.h"

namespace dfarm::store {

// How many connections a `dfarm node` shares among its devices by default
// (`--connections`); the queue benchmark simulates the same.
inline constexpr int kNodeStoreConnections = 2;

class StorePool {
 public:
  using Opener = std::function<Result<std::unique_ptr<Store>>()>;

  // Keeps `open` (called on the borrowing thread, concurrently) for its
  // lifetime. `size` >= 1.
  StorePool(Opener open, int size);
  ~StorePool();
  StorePool(const StorePool&) = delete;
  StorePool& operator=(const StorePool&) = delete;

  // Runs fn(store, args...) on a borrowed connection: `fn` is a Store method
  // (&Store::ClaimJob) or a callable taking Store&. It must return a
  // Result<T>; an error opening a connection is returned as its error.
  template <typename F, typename... Args>
  std::invoke_result_t<F, Store&, Args...> Call(F&& fn, Args&&... args) {
    Lease lease(*this);
    if (!lease.store) return std::move(lease.error);
    return std::invoke(std::forward<F>(fn), *lease.store, std::forward<Args>(args)...);
  }

  // Opens connections until size() are open: at start, so that the first
  // calls wait for no connection setup (and a database that refuses that
  // many says so at once). Stops at the first open that fails.
  Result<void> Fill();

  int size() const { return size_; }
  // Connections open now (idle or borrowed); never more than size().
  int open() const;
  // Connections opened so far, replacements included.
  int64_t opened() const;
  // Threads waiting for a connection now.
  int waiting() const;

 private:
  // One call's connection, given back (or closed, when lost) at its end.
  struct Lease {
    explicit Lease(StorePool& pool);
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    StorePool& pool;
    const StorePool* outer;        // what this thread held before (another pool's call)
    std::unique_ptr<Store> store;  // null: opening failed (`error`)
    Error error;
  };

  // Opens a connection for a slot already counted in open_count_: counts it
  // in opened_, or frees the slot when the open fails.
  Result<std::unique_ptr<Store>> OpenReserved();

  const Opener open_;
  const int size_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Store>> idle_;  // guarded by mu_
  int open_count_ = 0;                        // guarded by mu_: idle, borrowed or opening
  int64_t opened_ = 0;                        // guarded by mu_
  uint64_t next_ticket_ = 0;                  // guarded by mu_: first come first served
  uint64_t serving_ = 0;                      // guarded by mu_
};

}  // namespace dfarm::store
