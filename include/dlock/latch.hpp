// SPDX-License-Identifier: BSL-1.0
/// @file
/// A count-down latch shared by processes through a store: wait until N members have counted down.
#pragma once

#include <dlock/error.hpp>
#include <dlock/export.hpp>
#include <dlock/guard.hpp>
#include <dlock/store.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>

namespace dlock {

class registry;

namespace detail {
struct latch_core;
}

/// Settings of one latch.
struct latch_config {
    /// How long the latch lives at the store after its latest count-down (each count-down
    /// sets it again). When it runs out the store forgets the latch, done or not: the name
    /// then starts afresh, and a waiter that comes later waits for a new round of
    /// count-downs. Must be positive (and no longer than the store allows: invalid_lease).
    std::chrono::milliseconds ttl = std::chrono::hours(24);
};

/// A count-down latch: `count` distinct members count down, and waiters wake when the last
/// one has. Built from a registry, whose store, name prefix, name rules and retry backoff it
/// uses; the same name and count in another process (on the same store and prefix) is the
/// same latch. A latch is a cheap copyable handle; copies share one state.
///
/// Stores: memory_store, redis_store (single node, Sentinel), cluster_store, postgres_store
/// and etcd_store keep latches; any other store fails every operation with
/// error::not_supported.
///
/// @errors Of every operation: invalid_name (name empty or too long), invalid_option (count
/// 0 or above max_latch_count, an empty member), invalid_lease (a ttl the store cannot set),
/// count_mismatch (the latch exists with another count), not_supported, closed (the store is
/// gone), invalid_handle (a default-constructed latch), and a store's permanent errors.
/// Transient store errors (is_transient()) are retried with the registry's backoff until the
/// operation succeeds, fails for good, or is cancelled.
///
/// @completion Runs on the store's executor (an empty latch: the handler's own), never
/// inside the initiating call. Lifetimes: the registry's store must outlive the latch and
/// its operations.
/// @threadsafety None: use it on the store's executor.
class DLOCK_API latch {
public:
    /// count_down's completion: the error, and the count-downs still missing (0: done).
    using count_down_signature = void(boost::system::error_code, std::uint64_t);
    /// wait's completion.
    using wait_signature = void(boost::system::error_code);
    /// count's completion: the error, and the count-downs still missing.
    using count_signature = void(boost::system::error_code, std::uint64_t);

    /// An empty latch: every operation completes with error::invalid_handle.
    latch() = default;
    /// The latch `name` of `count` members on `reg`'s store. Bad arguments are reported by
    /// the operations.
    latch(registry& reg, std::string_view name, std::uint64_t count, latch_config cfg = {});

    /// The name as given (without the registry's prefix).
    const std::string& name() const noexcept;
    /// The count given at construction.
    std::uint64_t initial_count() const noexcept;
    /// The executor type: Asio's polymorphic I/O executor.
    using executor_type = boost::asio::any_io_executor;
    /// The registry's executor (where completions run); empty for an empty latch.
    executor_type get_executor() const noexcept;

    /// Counts down once for a new member made up by the library (each call counts once;
    /// retries of one call reuse its member, so a lost reply retried still counts once).
    /// (Not for a member: `count_down("worker-3")` picks the overload below, as a name.)
    /// @completion count_down_signature: `void(error_code, remaining)`, remaining 0 once the
    /// latch is done.
    /// @errors As the class says; transient store errors are retried.
    /// @cancellation Terminal, partial, total: stops retrying and completes with
    /// operation_aborted; a count-down already sent may still have counted.
    template <class Token = boost::asio::deferred_t>
        requires(!std::is_convertible_v<Token &&, std::string_view>)
    auto count_down(Token&& token = {})
    {
        return start_count_down(false, std::string(), std::forward<Token>(token));
    }

    /// Counts down for `member`, a caller's id: the latch counts each member once, however
    /// often and from however many processes it counts down. Otherwise as count_down().
    /// @completion count_down_signature: `void(error_code, remaining)`.
    /// @errors As the class says; invalid_option for an empty `member`.
    /// @cancellation As count_down(): operation_aborted; a count-down sent may have counted.
    template <class Token = boost::asio::deferred_t>
    auto count_down(std::string_view member, Token&& token = {})
    {
        return start_count_down(true, std::string(member), std::forward<Token>(token));
    }

    /// Completes when the latch is done (its count reached 0), at once if it already is.
    /// Does not poll: it watches the name, checks, then sleeps until the store reports a
    /// change.
    /// @completion wait_signature: `void(error_code)`.
    /// @errors As the class says; transient store errors are retried.
    /// @cancellation Terminal, partial, total: completes with operation_aborted and leaves no
    /// watch (subscription) behind.
    template <class Token = boost::asio::deferred_t>
    auto wait(Token&& token = {})
    {
        return start_wait(std::chrono::milliseconds::max(), std::forward<Token>(token));
    }

    /// As wait(), but error::timeout after `d` (zero or less: one check).
    /// @completion wait_signature: `void(error_code)`.
    /// @errors As wait(); timeout when `d` has passed without the latch being done.
    /// @cancellation As wait(): operation_aborted, no watch left behind.
    template <class Token = boost::asio::deferred_t>
    auto wait_for(std::chrono::milliseconds d, Token&& token = {})
    {
        return start_wait(d, std::forward<Token>(token));
    }

    /// The count-downs still missing (the count if the latch does not exist yet). One read;
    /// changes nothing.
    /// @completion count_signature: `void(error_code, remaining)`.
    /// @errors As the class says; transient store errors are retried.
    /// @cancellation Terminal, partial, total: completes with operation_aborted.
    template <class Token = boost::asio::deferred_t>
    auto count(Token&& token = {})
    {
        return boost::asio::async_initiate<Token, count_signature>(
            [c = c_](auto h) {
                if (!c)
                    return detail::post_to_handler(std::move(h), make_error_code(error::invalid_handle),
                                                   std::uint64_t{0});
                latch::count_impl(c, std::move(h));
            },
            token);
    }

private:
    template <class Token>
    auto start_count_down(bool own, std::string member, Token&& token)
    {
        // The initiation keeps the shared settings, not `this`: a deferred operation may
        // start after the handle is gone.
        return boost::asio::async_initiate<Token, count_down_signature>(
            [c = c_](auto h, bool own, std::string m) {
                if (!c)
                    return detail::post_to_handler(std::move(h), make_error_code(error::invalid_handle),
                                                   std::uint64_t{0});
                latch::count_down_impl(c, own, std::move(m), std::move(h));
            },
            token, own, std::move(member));
    }
    template <class Token>
    auto start_wait(std::chrono::milliseconds d, Token&& token)
    {
        return boost::asio::async_initiate<Token, wait_signature>(
            [c = c_](auto h, std::chrono::milliseconds d) {
                if (!c)
                    return detail::post_to_handler(std::move(h), make_error_code(error::invalid_handle));
                latch::wait_impl(c, d, std::move(h));
            },
            token, d);
    }
    static void count_down_impl(const std::shared_ptr<detail::latch_core>& c, bool own, std::string member,
                                boost::asio::any_completion_handler<count_down_signature> h);
    static void wait_impl(const std::shared_ptr<detail::latch_core>& c, std::chrono::milliseconds d,
                          boost::asio::any_completion_handler<wait_signature> h);
    static void count_impl(const std::shared_ptr<detail::latch_core>& c,
                           boost::asio::any_completion_handler<count_signature> h);

    std::shared_ptr<detail::latch_core> c_;
};

}  // namespace dlock
