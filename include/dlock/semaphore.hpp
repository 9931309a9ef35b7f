// SPDX-License-Identifier: BSL-1.0
/// @file
/// A semaphore of N permits shared across processes: each permit is a lease of its own.
#pragma once

#include <dlock/error.hpp>
#include <dlock/export.hpp>
#include <dlock/guard.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/deferred.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace dlock {

namespace detail {
struct semaphore_state;
}

/// A counting semaphore from registry::obtain_semaphore: at most `permits()` guards of the
/// name exist at once across every process that uses it. Each permit is a lease, renewed
/// by the watchdog, lost (guard::is_lost, lost_slot) if it cannot be, and freed by itself if
/// its process dies, so a crashed holder's permit comes back after its lease. Each has its
/// own fencing token, strictly increasing per name. Waiters are served first come, first
/// served across processes (stores with direct hand-off: Redis, memory).
///
/// Every user of a name must give the same number of permits: a different one fails the
/// acquire with error::kind_mismatch (so does a name in use as a read-write lock).
/// Permits are not re-entrant: each acquire takes one more. Locally, a process talks to the
/// store once per permit it holds or waits for, at most `permits()` at a time; further local
/// waiters queue in the process and take over a permit when its holder releases it.
/// @completion As lock's acquire family: `void(error_code, guard)`, never inside the call.
/// @errors As lock's acquire family; also kind_mismatch (another number of permits, or a name
/// in use as another primitive), invalid_option (0 permits), not_supported (a store without
/// semaphores).
/// @cancellation As lock's acquire family: terminal, partial, total; nothing left behind.
/// @threadsafety None: use it on the registry's executor only.
class DLOCK_API semaphore {
public:
    /// The acquire family's completion: the error, and the guard of one permit (empty unless held).
    using acquire_signature = void(boost::system::error_code, guard);

    /// An empty semaphore: every acquire completes with error::invalid_handle.
    semaphore() = default;
    /// The name given to registry::obtain_semaphore.
    const std::string& name() const noexcept;
    /// The number of permits given to registry::obtain_semaphore.
    unsigned permits() const noexcept;
    /// The executor type: Asio's polymorphic I/O executor.
    using executor_type = boost::asio::any_io_executor;
    /// The registry's executor (where completions run); empty for an empty semaphore.
    executor_type get_executor() const noexcept;

    /// Waits until a permit is held.
    /// @completion acquire_signature: a guard that holds one permit.
    /// @errors As the class says; transient store errors are retried, never reported.
    /// @cancellation Terminal, partial, total: operation_aborted, nothing left behind.
    template <class Token = boost::asio::deferred_t>
    auto acquire(Token&& token = {})
    {
        return start(mode::wait, {}, std::forward<Token>(token));
    }
    /// One attempt: an empty guard if no permit is free.
    /// @completion acquire_signature: a guard that holds one permit, or an empty one.
    /// @errors As the class says, and the store's error if its one attempt failed.
    /// @cancellation Terminal, partial, total: operation_aborted, nothing left behind.
    template <class Token = boost::asio::deferred_t>
    auto try_acquire(Token&& token = {})
    {
        return start(mode::try_once, {}, std::forward<Token>(token));
    }
    /// Waits at most `d`, then error::timeout (as lock::acquire_for).
    /// @completion acquire_signature: a guard that holds one permit.
    /// @errors As the class says; timeout when `d` has passed.
    /// @cancellation Terminal, partial, total: operation_aborted, nothing left behind.
    template <class Token = boost::asio::deferred_t>
    auto acquire_for(std::chrono::milliseconds d, Token&& token = {})
    {
        return start(mode::bounded, d, std::forward<Token>(token));
    }
    /// available's completion: the error, and the permits free now.
    using available_signature = void(boost::system::error_code, unsigned);

    /// The permits free now across every process, as the store counts them: permits()
    /// minus the leases held (Redisson's availablePermits). A snapshot: another process may
    /// take one at once, so use it for metrics and decisions, never as a reservation.
    /// @completion available_signature: `void(error_code, unsigned)`.
    /// @errors invalid_handle (an empty semaphore), invalid_option (0 permits), invalid_name,
    /// not_supported (a store without semaphores), kind_mismatch (the name is in use as
    /// another primitive or a semaphore of another size, or this handle's size differs from
    /// the registry's first), closed (the store is gone), the store's (not retried).
    /// @cancellation Passed to the store's read, as election::leader.
    template <class Token = boost::asio::deferred_t>
    auto available(Token&& token = {})
    {
        return boost::asio::async_initiate<Token, available_signature>(
            [s = s_](auto h) {
                if (!s)
                    return detail::post_to_handler(std::move(h), make_error_code(error::invalid_handle), 0u);
                semaphore(s).available_impl(std::move(h));
            },
            token);
    }

    /// Acquires a permit, runs `body` with the permit's loss bound to its cancellation, and
    /// releases it (as lock::run).
    /// @errors Thrown as boost::system::system_error, as lock::run.
    /// @cancellation As lock::run.
    boost::asio::awaitable<void> run(std::function<boost::asio::awaitable<void>(guard&)> body);

private:
    friend class registry;
    enum class mode {
        wait,
        try_once,
        bounded
    };
    explicit semaphore(std::shared_ptr<detail::semaphore_state> s) noexcept : s_(std::move(s)) {}

    template <class Token>
    auto start(mode m, std::chrono::milliseconds d, Token&& token)
    {
        return boost::asio::async_initiate<Token, acquire_signature>(
            [s = s_](auto h, mode m, std::chrono::milliseconds d) {
                if (!s)
                    return detail::post_to_handler(std::move(h), make_error_code(error::invalid_handle), guard());
                semaphore(s).acquire_impl(m, d, std::move(h));
            },
            token, m, d);
    }
    void acquire_impl(mode m, std::chrono::milliseconds d, boost::asio::any_completion_handler<acquire_signature> h);
    void available_impl(boost::asio::any_completion_handler<available_signature> h);

    std::shared_ptr<detail::semaphore_state> s_;
};

}  // namespace dlock
