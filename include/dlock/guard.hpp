// SPDX-License-Identifier: BSL-1.0
/// @file
/// One hold of a lock: its fencing token, its lease deadline, its loss signal, its release.
#pragma once

#include <dlock/detail/completion.hpp>
#include <dlock/error.hpp>
#include <dlock/export.hpp>
#include <dlock/owner.hpp>
#include <dlock/store.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace dlock {

namespace detail {
struct hold;
class lock_driver;

/// The executor of a driver's registry (defined with the driver).
DLOCK_API const boost::asio::any_io_executor& executor_of(const lock_driver& e) noexcept;
}  // namespace detail

/// A held lock. Move-only. Empty when default-constructed, moved from, released, or
/// returned by a try_acquire that found the lock taken.
///
/// Destroying a guard that still holds releases it in the background (counted in
/// lock_stats::released_by_destructor); prefer `co_await g.release()` to see the outcome.
/// The guard keeps its lock's state alive; it must not outlive the store.
/// @threadsafety None: use it on the registry's executor only.
class DLOCK_API guard {
public:
    /// An empty guard.
    guard() noexcept = default;
    /// Takes the hold; the source is empty afterwards.
    guard(guard&&) noexcept = default;
    /// Releases this guard's own hold, if any, in the background (as the destructor does),
    /// then takes `other`'s; `other` is empty afterwards.
    guard& operator=(guard&& other) noexcept;
    /// Releases in the background if still held (never blocks, never throws).
    ~guard();

    /// True while this guard holds (even if the lease was lost: then release() says so).
    explicit operator bool() const noexcept { return owns_lock(); }
    /// True while this guard holds (even if the lease was lost: then release() says so).
    bool owns_lock() const noexcept;

    /// The lock name as given to registry::obtain.
    const std::string& name() const noexcept;
    /// Strictly increasing per store lease of the name, across processes and restarts of
    /// a persistent store; holders that get the lease by local hand-off share its token.
    /// 0 once the guard is empty (released or moved from): read it before release().
    std::uint64_t fencing_token() const noexcept;
    /// Local steady-clock end of the lease as last confirmed by the store; in the past once lost.
    std::chrono::steady_clock::time_point valid_until() const noexcept;
    /// The lease ended before release: stop working on what the lock protects. True as soon
    /// as valid_until() has passed, even before the watchdog has noticed (after a pause your
    /// code may resume before it), so check it right before a side effect.
    bool is_lost() const noexcept;
    /// The store lease behind this hold (name as the store sees it, lease token, reference),
    /// for writes the store fences by the lease (election::proclaim); empty once released.
    lease_key lease() const;
    /// The owner this hold belongs to: pass it to nested code to re-enter the lock.
    dlock::owner owner() const noexcept;

    /// Emits terminal cancellation when the lease is lost: bind it to work that must stop
    /// then, as in `asio::bind_cancellation_slot(g.lost_slot(), token)`. One binding at a time.
    boost::asio::cancellation_slot lost_slot() noexcept;

    /// Waits until the lease is lost; an alternative to lost_slot() for a task of its own.
    /// @completion `void(error_code)`: error::lock_lost when the lease is lost (at once if it
    /// already is), operation_aborted when the hold is released first.
    /// @errors not_held (an empty or released guard), operation_in_progress (another
    /// wait_lost on this hold is pending).
    /// @cancellation Terminal, partial, total: completes with operation_aborted; the hold is
    /// untouched.
    template <class Token = boost::asio::deferred_t>
    auto wait_lost(Token&& token = {})
    {
        // The operation keeps the hold, not `this`: it may start after the guard has moved.
        return boost::asio::async_initiate<Token, void(boost::system::error_code)>(
            [hold = h_](auto h) {
                if (!hold)
                    return detail::post_to_handler(std::move(h), make_error_code(error::not_held));
                wait_lost_impl(hold, std::move(h));
            },
            token);
    }

    /// Ends this hold. The last hold of an owner releases the store lease, or hands it to
    /// the next local waiter. The operation takes the hold when made (this guard is then
    /// empty), so it may start after the guard has moved or gone; dropped unstarted, it
    /// releases in the background.
    /// @completion `void(error_code)`: success once the store has released the lease (at
    /// once for an inner re-entrant hold, a local hand-off or a read lease kept for the next reader).
    /// @errors lock_lost if the lease had ended before, or the store says it was no longer
    /// ours; not_held for an empty guard; closed if the store is gone; a store error if the
    /// store could not be reached (transient ones are retried while the lease could still be
    /// ours; the lease then ends by itself at its expiry).
    /// @cancellation Not cancellable: the release goes through whatever the caller does.
    template <class Token = boost::asio::deferred_t>
    auto release(Token&& token = {})
    {
        return boost::asio::async_initiate<Token, void(boost::system::error_code)>(
            [g = std::move(*this)](auto h) mutable {
                if (!g.h_)
                    return detail::post_to_handler(std::move(h), make_error_code(error::not_held));
                bool in_place = detail::completes_in_place(h, detail::executor_of(*g.driver_of()));
                g.release_impl(std::move(h), in_place);
            },
            token);
    }

    /// The executor type: Asio's polymorphic I/O executor.
    using executor_type = boost::asio::any_io_executor;
    /// The registry's executor (where completions run); empty for an empty guard.
    executor_type get_executor() const noexcept;

private:
    friend class detail::lock_driver;
    friend class leadership;  // its proclaim keeps the hold, as wait_lost does
    explicit guard(std::shared_ptr<detail::hold> h) noexcept : h_(std::move(h)) {}
    static void wait_lost_impl(const std::shared_ptr<detail::hold>& hold,
                               boost::asio::any_completion_handler<void(boost::system::error_code)> h);
    void release_impl(boost::asio::any_completion_handler<void(boost::system::error_code)> h, bool in_place);
    const detail::lock_driver* driver_of() const noexcept;

    std::shared_ptr<detail::hold> h_;
};

}  // namespace dlock
