// Hands out one shared lock state per name, and frees it when nobody uses it any more.
#pragma once

#include <dlock/config.hpp>
#include <dlock/lock.hpp>
#include <dlock/stats.hpp>
#include <dlock/store.hpp>

#include <memory>
#include <string_view>

namespace dlock {

namespace detail {
struct registry_state;
}

/// The entry point: `registry.obtain(name)` returns a lock whose state is shared by every
/// handle to the same name in this registry, so same-process contention queues locally and
/// only one coroutine at a time talks to the store for that name.
///
/// Lifetimes: the store must outlive the registry and every lock and guard from it. A
/// name's state lives while a handle, a guard or a waiter uses it, then is freed.
/// Executor: the store's; single-threaded use only.
class registry {
public:
    /// Locks on `s` with `cfg` (validated per acquire: bad settings give error::invalid_lease).
    explicit registry(store& s, lock_config cfg = {});
    ~registry();
    registry(const registry&) = delete;
    registry& operator=(const registry&) = delete;

    /// The lock for `name`. Invalid names are reported by acquire (error::invalid_name).
    lock obtain(std::string_view name);

    /// The settings every lock of this registry uses.
    const lock_config& config() const noexcept;
    /// Counters and histograms over every lock of this registry.
    const lock_stats& stats() const noexcept;
    /// Names with live state (handles, guards, waiters or background work).
    std::size_t size() const noexcept;

private:
    std::shared_ptr<detail::registry_state> state_;
};

}  // namespace dlock
