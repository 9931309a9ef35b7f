// SPDX-License-Identifier: BSL-1.0
/// @file
/// Hands out one shared lock state per name, and frees it when nobody uses it any more.
#pragma once

#include <dlock/config.hpp>
#include <dlock/export.hpp>
#include <dlock/lock.hpp>
#include <dlock/rw_lock.hpp>
#include <dlock/semaphore.hpp>
#include <dlock/stats.hpp>
#include <dlock/store.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>

#include <memory>
#include <string_view>

namespace dlock {

namespace detail {
struct registry_state;
class lock_driver;
}  // namespace detail

/// The entry point: `registry.obtain(name)` returns a lock whose state is shared by every
/// handle to the same name in this registry, so same-process contention queues locally and
/// only one coroutine at a time talks to the store for that name.
///
/// Lifetimes: the store must outlive the registry and every lock and guard from it. A
/// name's state lives while a handle, a guard or a waiter uses it, then is freed.
/// @threadsafety None: use the registry and everything from it on the store's executor, from
/// one thread at a time (an io_context run by one thread, or a strand).
class DLOCK_API registry {
public:
    /// Locks on `s` with `cfg` (validated per acquire: bad settings give error::invalid_lease,
    /// or error::invalid_option for the backoff settings).
    explicit registry(store& s, lock_config cfg = {});
    /// Leaves locks, guards and waiters from it working: they keep the registry's state.
    ~registry();
    registry(const registry&) = delete;
    registry& operator=(const registry&) = delete;

    /// The lock for `name`. Invalid names are reported by acquire (error::invalid_name).
    lock obtain(std::string_view name);
    /// The read-write lock for `name` (a name is one kind of primitive: a mutex, a read-write
    /// lock or a semaphore). Stores without read-write locks fail its acquires with
    /// error::not_supported.
    rw_lock obtain_rw(std::string_view name);
    /// The semaphore of `permits` for `name`, shared by every handle to it in this registry
    /// (a second handle with another number fails its acquires with error::kind_mismatch;
    /// 0 permits: error::invalid_option). Stores without semaphores: error::not_supported.
    semaphore obtain_semaphore(std::string_view name, unsigned permits);

    /// The store this registry's locks (and latches, elections) use.
    store& get_store() const noexcept;
    /// The executor type: Asio's polymorphic I/O executor.
    using executor_type = boost::asio::any_io_executor;
    /// The store's executor: where every completion of this registry's objects runs.
    executor_type get_executor() const noexcept;

    /// The settings every lock of this registry uses.
    const lock_config& config() const noexcept;
    /// Why the settings or the store were refused when the registry was built (empty: they
    /// were not): invalid_lease or invalid_option for settings the store cannot honour,
    /// not_supported for a capability in lock_config::needs the store lacks. Every acquire
    /// of the registry fails with it.
    boost::system::error_code config_error() const noexcept;
    /// Counters and histograms over every lock of this registry.
    const lock_stats& stats() const noexcept;
    /// Names with live state (handles, guards, waiters or background work).
    std::size_t size() const noexcept;
    /// Store requests of this registry in flight (attempts, renewals, releases).
    std::size_t in_flight() const noexcept;

    /// Completes when no store request of this registry is in flight, such as the release that
    /// gives back what a cancelled acquire's attempt took. Call it before closing the store,
    /// bounded by a timer or cancellation.
    /// @completion `void(error_code)`, on the store's executor (posted if nothing is in flight).
    /// @errors None: success once idle.
    /// @cancellation Terminal, partial, total: completes with operation_aborted; the requests
    /// in flight go on.
    template <class Token = boost::asio::deferred_t>
    auto async_drain(Token&& token = {})
    {
        // The operation keeps the registry's state, not `this`: it may start after the registry is gone.
        return boost::asio::async_initiate<Token, void(boost::system::error_code)>(
            [s = state_](auto h) { drain_impl(s, std::move(h)); }, token);
    }

private:
    friend class election;  // its lease is of kind leader where the store keeps that kind
    std::shared_ptr<detail::lock_driver> driver_for(lease_kind kind, std::string_view name);
    static void drain_impl(const std::shared_ptr<detail::registry_state>& state,
                           boost::asio::any_completion_handler<void(boost::system::error_code)> h);

    std::shared_ptr<detail::registry_state> state_;
};

}  // namespace dlock
