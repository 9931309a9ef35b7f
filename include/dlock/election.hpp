// SPDX-License-Identifier: BSL-1.0
/// @file
/// Leader election on a lock: the leader of a name is the holder of the mutex of that name.
#pragma once

#include <dlock/error.hpp>
#include <dlock/export.hpp>
#include <dlock/guard.hpp>
#include <dlock/lock.hpp>
#include <dlock/store.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace dlock {

class registry;

namespace detail {
struct election_core;
struct observer_core;
}  // namespace detail

/// Who leads a name, as the store says.
struct leader_info {
    bool present = false;    ///< a leader holds the name and has proclaimed its value
    std::string value{};     ///< the leader's value (empty without a leader)
    std::uint64_t term = 0;  ///< the leader's term: its lease's fencing token (0 without a leader)
    /// Equal when every field is (an observer gives only states that differ).
    friend bool operator==(const leader_info&, const leader_info&) = default;
};

/// One term of leadership, from election::campaign. Move-only. It is the mutex's guard
/// underneath: the watchdog keeps the lease, and the leader must stop its work when the
/// lease is lost, exactly as with a guard (is_lost, wait_lost, lost_slot).
/// @threadsafety None: use it on the registry's executor only.
class DLOCK_API leadership {
public:
    /// No leadership: is_leader() is false.
    leadership() = default;
    /// Takes the term; the source is empty afterwards.
    leadership(leadership&&) noexcept = default;
    /// Takes the source's term; this one's own, if any, is released in the background (as guard's).
    leadership& operator=(leadership&&) noexcept = default;

    /// True while this leadership holds and its lease's local deadline has not passed: never
    /// true after valid_until(). Check it right before each side effect of the leader.
    bool is_leader() const noexcept { return g_.owns_lock() && !g_.is_lost(); }
    /// is_leader().
    explicit operator bool() const noexcept { return is_leader(); }
    /// The term: the lease's fencing token, strictly increasing from leader to leader. Pass
    /// it to the resources the leader writes so they can refuse a deposed leader.
    std::uint64_t term() const noexcept { return g_.fencing_token(); }
    /// The value last proclaimed.
    const std::string& value() const noexcept;
    /// Local steady-clock end of the lease (see guard::valid_until).
    std::chrono::steady_clock::time_point valid_until() const noexcept { return g_.valid_until(); }
    /// The lease ended: stop leading (see guard::is_lost).
    bool is_lost() const noexcept { return g_.is_lost(); }
    /// Emits terminal cancellation when the lease is lost (see guard::lost_slot).
    boost::asio::cancellation_slot lost_slot() noexcept { return g_.lost_slot(); }
    /// Waits until the lease is lost (see guard::wait_lost).
    /// @completion `void(error_code)`: error::lock_lost when the lease is lost,
    /// operation_aborted after resign.
    /// @errors As guard::wait_lost: not_held, operation_in_progress.
    /// @cancellation Terminal, partial, total: operation_aborted; the term goes on.
    template <class Token = boost::asio::deferred_t>
    auto wait_lost(Token&& token = {})
    {
        return g_.wait_lost(std::forward<Token>(token));
    }
    /// The guard underneath (for lock::run-style use).
    dlock::guard& get_guard() noexcept { return g_; }
    /// The executor type: Asio's polymorphic I/O executor.
    using executor_type = boost::asio::any_io_executor;
    /// The registry's executor (where completions run); empty for an empty leadership.
    executor_type get_executor() const noexcept;

    /// Replaces the leader's value, only while still leading: the store writes it only if
    /// this lease still holds the name (fenced), and observers then see it.
    /// @completion `void(error_code)`.
    /// @errors lock_lost if the lease is gone (locally or at the store), not_held after
    /// resign (or for an empty leadership), closed if the store is gone, the store's error
    /// otherwise (transient ones are retried until the lease's local deadline).
    /// @cancellation Terminal, partial, total: operation_aborted (a write already sent may
    /// still land).
    template <class Token = boost::asio::deferred_t>
    auto proclaim(std::string value, Token&& token = {})
    {
        // The operation keeps the term's state, not `this`: it may start after a move.
        return boost::asio::async_initiate<Token, void(boost::system::error_code)>(
            [c = c_, hold = g_.h_, out = value_](auto h, std::string v) {
                if (!c || !hold)  // resigned, moved from or empty: no executor of ours
                    return detail::post_to_handler(std::move(h), make_error_code(error::not_held));
                proclaim_impl(c, hold, out, std::move(v), std::move(h));
            },
            token, std::move(value));
    }

    /// Ends the term: releases the lease (the store then reports no leader, or the next
    /// one). The operation takes the term when made, as guard::release.
    /// @completion `void(error_code)`, as guard::release.
    /// @errors As guard::release: lock_lost, not_held, closed, a store error.
    /// @cancellation Not cancellable, as guard::release.
    template <class Token = boost::asio::deferred_t>
    auto resign(Token&& token = {})
    {
        return g_.release(std::forward<Token>(token));
    }

private:
    friend struct detail::election_core;
    leadership(guard g, std::shared_ptr<detail::election_core> c, std::string value);
    static void proclaim_impl(const std::shared_ptr<detail::election_core>& c,
                              const std::shared_ptr<detail::hold>& hold, std::shared_ptr<std::string> out,
                              std::string value,
                              boost::asio::any_completion_handler<void(boost::system::error_code)> h);

    guard g_;
    std::shared_ptr<detail::election_core> c_;
    std::shared_ptr<std::string> value_;
};

/// A stream of leader changes (election::observe). Move-only; destroying it stops the
/// watch (nothing left behind at the store).
/// @threadsafety None: use it on the registry's executor only.
class DLOCK_API leader_observer {
public:
    /// No stream: async_next completes with error::invalid_handle.
    leader_observer() = default;
    /// Takes the stream; the source is empty afterwards.
    leader_observer(leader_observer&&) noexcept = default;
    /// Stops this observer's own watch, then takes the source's stream.
    leader_observer& operator=(leader_observer&&) noexcept;
    /// Stops the watch; a pending async_next completes with operation_aborted.
    ~leader_observer();

    /// The next change: first the current state, then each state that differs from the
    /// last one given (another term, another value, no leader). A change is seen when the
    /// store announces it (a proclaim, a release) or when the leader's lease runs out
    /// (expiry is announced by nobody: the observer reads again at the lease's end).
    /// States that pass quicker than a store round trip may be merged. Changes wait in a
    /// queue until taken. The operation keeps the stream, not `this`: started after a move
    /// it reads the same stream; started after the observer is destroyed, it completes with
    /// operation_aborted.
    /// @completion `void(error_code, leader_info)`.
    /// @errors operation_aborted (the observer was destroyed), invalid_handle (an empty
    /// observer), operation_in_progress (another async_next is pending), closed (the store is
    /// gone), a store's permanent error (not_supported, ...), which ends the stream: every
    /// later call reports it too. Transient store errors are retried.
    /// @cancellation Terminal, partial, total: operation_aborted; the change stays queued.
    template <class Token = boost::asio::deferred_t>
    auto async_next(Token&& token = {})
    {
        return boost::asio::async_initiate<Token, void(boost::system::error_code, leader_info)>(
            [c = c_](auto h) {
                if (!c)
                    return detail::post_to_handler(std::move(h), make_error_code(error::invalid_handle), leader_info{});
                next_impl(c, std::move(h));
            },
            token);
    }

    /// The executor type: Asio's polymorphic I/O executor.
    using executor_type = boost::asio::any_io_executor;
    /// The registry's executor (where completions run); empty for an empty observer.
    executor_type get_executor() const noexcept;

private:
    friend class election;
    explicit leader_observer(std::shared_ptr<detail::observer_core> c) noexcept : c_(std::move(c)) {}
    static void next_impl(const std::shared_ptr<detail::observer_core>& c,
                          boost::asio::any_completion_handler<void(boost::system::error_code, leader_info)> h);

    std::shared_ptr<detail::observer_core> c_;
};

/// How election::run treats a term that ends by loss.
struct election_run_options {
    /// Campaign again after a term is lost (the lease lost while the body ran: a store
    /// outage, a pause longer than the lease, an operator's force release) and run the body
    /// again with the new term, as Curator's LeaderLatch re-joins after its session is lost.
    /// false: the loss ends run() with error::lock_lost, as lock::run.
    bool rejoin = false;
};

/// Leader election for one name, built from a registry: the election of a name is the
/// registry's mutex of that name (same store, prefix, lease and watchdog settings), with
/// the leader's value stored with the lease. run() campaigns, leads and re-joins in one call.
///
/// Stores: memory_store, redis_store (single node, Sentinel, with scripting),
/// cluster_store, zookeeper_store (Curator's LeaderLatch layout), etcd_store (etcd's
/// concurrency.Election layout) and postgres_store (the name's row); others fail campaign, leader and observe with
/// error::not_supported. Completion runs on the store's executor, never inside the
/// initiating call. Lifetimes: the store must outlive the election, its leadership and
/// observers.
/// @threadsafety None: use it on the registry's executor only.
class DLOCK_API election {
public:
    /// campaign's completion: the error, and the leadership (empty unless leading).
    using campaign_signature = void(boost::system::error_code, leadership);
    /// leader's completion: the error, and who leads.
    using leader_signature = void(boost::system::error_code, leader_info);

    /// An empty election: every operation completes with error::invalid_handle.
    election() = default;
    /// The election of `name` on `reg`'s mutex of that name. Bad names are reported by the
    /// operations (error::invalid_name).
    election(registry& reg, std::string_view name);

    /// The name as given (without the registry's prefix).
    const std::string& name() const noexcept;
    /// The executor type: Asio's polymorphic I/O executor.
    using executor_type = boost::asio::any_io_executor;
    /// The registry's executor (where completions run); empty for an empty election.
    executor_type get_executor() const noexcept;

    /// Waits to become leader, then proclaims `value`: completes with the leadership.
    /// @completion campaign_signature: `void(error_code, leadership)`.
    /// @errors not_supported at once from a store without elections; then those of
    /// lock::acquire, then of proclaim (lock_lost if the lease was lost before the value
    /// was written).
    /// @cancellation Terminal, partial, total: stops waiting; a lease already taken is
    /// released, so nothing is left behind.
    template <class Token = boost::asio::deferred_t>
    auto campaign(std::string value, Token&& token = {})
    {
        return boost::asio::async_initiate<Token, campaign_signature>(
            [c = c_](auto h, std::string v) {
                if (!c)
                    return detail::post_to_handler(std::move(h), make_error_code(error::invalid_handle), leadership());
                election::campaign_impl(c, std::move(v), std::move(h));
            },
            token, std::move(value));
    }

    /// The store's current leader (one read).
    /// @completion leader_signature: `void(error_code, leader_info)`.
    /// @errors closed (the store is gone), invalid_handle, not_supported, the store's error
    /// (not retried).
    /// @cancellation Passed to the store's read: the Redis stores honour it as
    /// redis::connection::async_exec does; memory_store completes regardless.
    template <class Token = boost::asio::deferred_t>
    auto leader(Token&& token = {})
    {
        return boost::asio::async_initiate<Token, leader_signature>(
            [c = c_](auto h) {
                if (!c)
                    return detail::post_to_handler(std::move(h), make_error_code(error::invalid_handle), leader_info{});
                election::leader_impl(c, std::move(h));
            },
            token);
    }

    /// Starts watching the leader of the name; take changes with leader_observer::async_next().
    /// An empty election gives an empty observer.
    leader_observer observe();

    /// Campaigns with `value`, runs `body` while leading, and resigns when it returns. A lost
    /// lease stops the body at its next co_await (the leadership's lost_slot); with
    /// `opts.rejoin` the election is then joined again and the body runs again with the new,
    /// higher term, for as long as losses stop it (a lease lost during a campaign too). run()
    /// ends when the body returns, or throws while its lease still holds (a loss reported
    /// by the resignation just then counts as the loss, and the body's exception is dropped).
    /// @errors Thrown as boost::system::system_error: campaign's errors; lock_lost if a term
    /// was lost and `opts.rejoin` is false, or if the body returned after its lease was
    /// lost; then the body's own exception; then resign's error.
    /// @cancellation The awaiting coroutine's cancellation reaches each campaign (terminal by
    /// default): a rejoining candidate is stopped that way between terms. The body is
    /// cancelled only by a loss, and resign is not cancellable (as lock::run): a cancellation
    /// during the body lets the term end as it would, then stops run() with
    /// operation_aborted instead of another campaign.
    boost::asio::awaitable<void> run(std::string value, std::function<boost::asio::awaitable<void>(leadership&)> body,
                                     election_run_options opts = {});

private:
    static void campaign_impl(const std::shared_ptr<detail::election_core>& c, std::string value,
                              boost::asio::any_completion_handler<campaign_signature> h);
    static void leader_impl(const std::shared_ptr<detail::election_core>& c,
                            boost::asio::any_completion_handler<leader_signature> h);

    std::shared_ptr<detail::election_core> c_;
};

}  // namespace dlock
