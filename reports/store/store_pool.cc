#include "reports/store/store_pool.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace dfarm::store {
namespace {

// The pool whose connection this thread holds now (a call in progress).
thread_local const StorePool* t_held = nullptr;

}  // namespace

StorePool::StorePool(Opener open, int size) : open_(std::move(open)), size_(std::max(size, 1)) {}

StorePool::~StorePool() = default;

StorePool::Lease::Lease(StorePool& p) : pool(p), outer(t_held) {
  if (t_held == &p) {
    std::fprintf(stderr,
                 "StorePool::Call made inside another call of the same pool on one thread: it "
                 "would wait for itself\n");
    std::abort();
  }
  bool must_open = false;
  {
    std::unique_lock lock(p.mu_);
    const uint64_t ticket = p.next_ticket_++;
    p.cv_.wait(lock, [&] {
      return p.serving_ == ticket && (!p.idle_.empty() || p.open_count_ < p.size_);
    });
    ++p.serving_;
    if (!p.idle_.empty()) {
      store = std::move(p.idle_.back());
      p.idle_.pop_back();
    } else {
      ++p.open_count_;  // this slot is ours while we open it
      must_open = true;
    }
  }
  p.cv_.notify_all();  // the next in line may go
  if (must_open) {
    auto opened = p.OpenReserved();
    if (opened) {
      store = std::move(*opened);
    } else {
      error = opened.error();
    }
  }
  if (!store) {
    p.cv_.notify_all();
    return;
  }
  t_held = &p;
}

StorePool::Lease::~Lease() {
  if (!store) return;
  t_held = outer;
  std::unique_ptr<Store> closing;  // closed after the lock is let go
  {
    std::lock_guard lock(pool.mu_);
    if (store->ConnectionLost()) {
      closing = std::move(store);
      --pool.open_count_;
    } else {
      pool.idle_.push_back(std::move(store));
    }
  }
  pool.cv_.notify_all();
}

Result<void> StorePool::Fill() {
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (open_count_ >= size_) return Ok();
      ++open_count_;
    }
    auto opened = OpenReserved();
    if (opened) {
      std::lock_guard lock(mu_);
      idle_.push_back(std::move(*opened));
    }
    cv_.notify_all();
    if (!opened) return opened.error();
  }
}

Result<std::unique_ptr<Store>> StorePool::OpenReserved() {
  auto opened = open_();
  std::lock_guard lock(mu_);
  if (opened) {
    ++opened_;
  } else {
    --open_count_;  // the slot is free again
  }
  return opened;
}

int StorePool::open() const {
  std::lock_guard lock(mu_);
  return open_count_;
}

int64_t StorePool::opened() const {
  std::lock_guard lock(mu_);
  return opened_;
}

int StorePool::waiting() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(next_ticket_ - serving_);
}

}  // namespace dfarm::store
