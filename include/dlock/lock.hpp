// SPDX-License-Identifier: BSL-1.0
/// @file
/// A handle to one named lock; cheap to copy, shares its per-name state with every copy.
#pragma once

#include <dlock/error.hpp>
#include <dlock/export.hpp>
#include <dlock/guard.hpp>
#include <dlock/owner.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/deferred.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>

namespace dlock {

/// A named lock from registry::obtain. A cheap handle: copies share the name's state.
///
/// The acquire family (acquire, try_acquire, acquire_for; each also for an explicit owner)
/// has these sections in common:
/// @completion `void(error_code, guard)` (acquire_signature), on the registry's executor (an
/// empty lock: the handler's own), never inside the initiating call. Success gives a guard
/// that holds; try_acquire gives an empty one if the lock is held elsewhere.
/// @errors invalid_name, invalid_lease, invalid_option (bad registry settings), timeout
/// (acquire_for), lock_lost (re-entry into a lost hold), closed (the store is gone),
/// invalid_handle (an empty lock), kind_mismatch and not_supported (the store or the name
/// does not serve this kind). try_acquire also reports the store's error when its one
/// attempt failed (connection_lost, timeout, no_quorum, ...). acquire and acquire_for retry
/// transient store errors (is_transient()) with backoff and fail at once on a permanent one
/// (permission_denied, wrong_type, server_error, ...): diagnostics() then has the server's
/// text. acquire_for gives even a zero or sub-round-trip bound one attempt; a bound too
/// large for the clock means no bound.
/// @cancellation Terminal, partial and total (all complete with operation_aborted): the
/// waiter leaves the local queue at once; a store request already sent is finished in the
/// background and its lease, if any, released with the same token, so nothing is left behind.
/// @threadsafety None: use a lock, its copies and its guards on the registry's executor only.
class DLOCK_API lock {
public:
    /// The acquire family's completion: the error, and the guard (empty unless held).
    using acquire_signature = void(boost::system::error_code, guard);

    /// An empty lock: every acquire completes with error::invalid_handle.
    lock() = default;
    /// The name given to registry::obtain (without the registry's prefix).
    const std::string& name() const noexcept;
    /// The executor type: Asio's polymorphic I/O executor.
    using executor_type = boost::asio::any_io_executor;
    /// The registry's executor (where completions run); empty for an empty lock.
    executor_type get_executor() const noexcept;

    /// Waits until held, for a new owner (no re-entry).
    /// @completion acquire_signature: a guard that holds.
    /// @errors As the class says; transient store errors are retried, never reported.
    /// @cancellation Terminal, partial, total: operation_aborted, nothing left behind.
    template <class Token = boost::asio::deferred_t>
        requires(!std::is_same_v<std::decay_t<Token>, owner>)
    auto acquire(Token&& token = {}) { return start(owner(), mode::wait, {}, std::forward<Token>(token)); }

    /// Waits until held by `o`; immediate if `o` already holds it (re-entry: one more hold,
    /// the store lease is released with the last).
    /// @completion acquire_signature: a guard that holds.
    /// @errors As the class says; lock_lost if `o` re-enters a hold whose lease was lost.
    /// @cancellation Terminal, partial, total: operation_aborted, nothing left behind.
    template <class Token = boost::asio::deferred_t>
    auto acquire(const owner& o, Token&& token = {})
    {
        return start(o, mode::wait, {}, std::forward<Token>(token));
    }

    /// One attempt, no waiting: an empty guard if the lock is held elsewhere.
    /// @completion acquire_signature: a guard that holds, or an empty one.
    /// @errors As the class says, and the store's error if its one attempt failed (not retried).
    /// @cancellation Terminal, partial, total: operation_aborted, nothing left behind.
    template <class Token = boost::asio::deferred_t>
        requires(!std::is_same_v<std::decay_t<Token>, owner>)
    auto try_acquire(Token&& token = {}) { return start(owner(), mode::try_once, {}, std::forward<Token>(token)); }

    /// One attempt for `o`; immediate if `o` already holds it (re-entry).
    /// @completion acquire_signature: a guard that holds, or an empty one.
    /// @errors As try_acquire().
    /// @cancellation Terminal, partial, total: operation_aborted, nothing left behind.
    template <class Token = boost::asio::deferred_t>
    auto try_acquire(const owner& o, Token&& token = {})
    {
        return start(o, mode::try_once, {}, std::forward<Token>(token));
    }

    /// acquire_for waits without limit, like acquire, when given a longer duration: no
    /// steady_clock deadline could be formed from it (about 146 years; the clock counts
    /// nanoseconds in 64 bits).
    static constexpr std::chrono::milliseconds unlimited_after =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::duration::max()) / 2;

    /// Waits at most `d`; then error::timeout. Zero or less: one attempt, then timeout.
    /// Longer than unlimited_after (e.g. milliseconds::max()): no limit.
    /// @completion acquire_signature: a guard that holds.
    /// @errors As the class says; timeout when `d` has passed (the attempt in flight is undone).
    /// @cancellation Terminal, partial, total: operation_aborted, nothing left behind.
    template <class Token = boost::asio::deferred_t>
    auto acquire_for(std::chrono::milliseconds d, Token&& token = {})
    {
        return start(owner(), bounded_mode(d), d, std::forward<Token>(token));
    }

    /// Waits at most `d` for `o`; immediate if `o` already holds it (re-entry). `d` as above.
    /// @completion acquire_signature: a guard that holds.
    /// @errors As acquire_for(std::chrono::milliseconds, Token&&).
    /// @cancellation Terminal, partial, total: operation_aborted, nothing left behind.
    template <class Token = boost::asio::deferred_t>
    auto acquire_for(const owner& o, std::chrono::milliseconds d, Token&& token = {})
    {
        return start(o, bounded_mode(d), d, std::forward<Token>(token));
    }

    /// The store's text (untrusted, for logs) for the last permanent error that failed an
    /// acquire of this name; empty if none.
    const std::string& diagnostics() const noexcept;

    /// force_release's completion: the error, and whether a lease of this lock's side was held.
    using force_signature = void(boost::system::error_code, bool);
    /// The operator's escape hatch (Redisson's forceUnlock): frees the name at the store,
    /// whoever holds it in any process, and serves its queue. A mutex (or an election): its
    /// lease; a read-write lock's read() side: every reader's lease; its write() side: the
    /// writer's. The holders are not told: each learns it at its next renewal (lock_lost).
    /// @completion force_signature: `void(error_code, bool was_held)`.
    /// @errors invalid_handle (an empty lock), closed (the store is gone), not_supported (a
    /// side of a read-write lock on a store without them), the store's (not retried).
    /// @cancellation None: one store request, bounded by the store's request timeout.
    template <class Token = boost::asio::deferred_t>
    auto force_release(Token&& token = {})
    {
        return boost::asio::async_initiate<Token, force_signature>(
            [e = e_](auto h) {
                if (!e)
                    return detail::post_to_handler(std::move(h), make_error_code(error::invalid_handle), false);
                lock(e).force_release_impl(std::move(h));
            },
            token);
    }

    /// Acquires, runs `body` with the guard's loss bound to its cancellation, and releases.
    /// A lost lease stops the body at its next co_await; run() then throws
    /// system_error(error::lock_lost). Exceptions from the body propagate after the release.
    /// @errors Thrown as boost::system::system_error: the acquire's errors; lock_lost if the
    /// lease was lost; then the body's exception; then the release's error.
    /// @cancellation The awaiting coroutine's cancellation reaches the acquire (as its
    /// cancellation state lets it: terminal by default); the body is then cancelled only by the
    /// loss (terminal), and the release is not cancellable.
    boost::asio::awaitable<void> run(std::function<boost::asio::awaitable<void>(guard&)> body);

private:
    friend class registry;
    friend class semaphore;
    friend class election;
    enum class mode {
        wait,
        try_once,
        bounded
    };
    explicit lock(std::shared_ptr<detail::lock_driver> e) noexcept : e_(std::move(e)) {}
    // A deadline now() + d would overflow the clock and lie in the past (an instant
    // timeout); such a wait is unlimited.
    static constexpr mode bounded_mode(std::chrono::milliseconds d) noexcept
    {
        return d > unlimited_after ? mode::wait : mode::bounded;
    }

    template <class Token>
    auto start(const owner& o, mode m, std::chrono::milliseconds d, Token&& token)
    {
        // The initiation keeps the lock's state, not `this`: a deferred acquire may start
        // after the handle it came from is gone (`co_await locks.obtain(n).acquire()`).
        return boost::asio::async_initiate<Token, acquire_signature>(
            [e = e_](auto h, owner o, mode m, std::chrono::milliseconds d) {
                if (!e)  // no registry, so no executor of ours: the handler's own
                    return detail::post_to_handler(std::move(h), make_error_code(error::invalid_handle), guard());
                bool in_place = detail::completes_in_place(h, detail::executor_of(*e));
                lock(e).acquire_impl(o, m, d, std::move(h), in_place);
            },
            token, o, m, d);
    }
    void acquire_impl(owner o, mode m, std::chrono::milliseconds d,
                      boost::asio::any_completion_handler<acquire_signature> h, bool in_place = false);
    void force_release_impl(boost::asio::any_completion_handler<force_signature> h);

    std::shared_ptr<detail::lock_driver> e_;
};

}  // namespace dlock
