// SPDX-License-Identifier: BSL-1.0
/// @file
/// A read-write lock shared across processes: many readers or one writer.
#pragma once

#include <dlock/lock.hpp>

#include <string>

namespace dlock {

/// From registry::obtain_rw: two locks on one name. `read()` is shared by any number of
/// readers in any number of processes; `write()` excludes every reader and other writer.
///
/// Waiting is first come, first served across processes (stores with direct hand-off: Redis,
/// memory): a writer queued behind readers gets in before readers that come after it, and
/// readers queued together are let in together. In one process, every reader shares one
/// read lease of the store, so local readers cost no round trip; new local readers stop
/// joining it once the store says a writer waits (checked at the latest every
/// lock_config::handoff_budget joins or renewal), and the lease goes back when the last
/// of them releases. Each reader's lease ends by itself if its process dies.
/// Fencing tokens: strictly increasing per name for writers (readers get one too, from the
/// same counter). Re-entry by owner works on each side (a reader re-entering while a writer
/// waits is let in: it would otherwise wait for itself); upgrading a read hold to a write
/// hold is not supported (it would wait for itself: take the write lock from the start).
///
/// Completion, errors and cancellation: each side is a lock (see lock's acquire family).
/// Stores without read-write locks (store_traits::kinds) fail its acquires with
/// error::not_supported; a name in use as another primitive with error::kind_mismatch.
/// @threadsafety None: use it on the registry's executor only.
class rw_lock {
public:
    /// An empty rw_lock: both sides are empty locks (error::invalid_handle).
    rw_lock() = default;
    /// The name given to registry::obtain_rw.
    const std::string& name() const noexcept { return read_.name(); }
    /// The executor type: Asio's polymorphic I/O executor.
    using executor_type = lock::executor_type;
    /// The registry's executor (where completions run); empty for an empty rw_lock.
    executor_type get_executor() const noexcept { return read_.get_executor(); }
    /// The shared side: its guards coexist with other readers' and exclude the writer.
    lock& read() noexcept { return read_; }
    /// The exclusive side: its guard excludes every reader and other writer.
    lock& write() noexcept { return write_; }

private:
    friend class registry;
    rw_lock(lock r, lock w) noexcept : read_(std::move(r)), write_(std::move(w)) {}
    lock read_, write_;
};

}  // namespace dlock
