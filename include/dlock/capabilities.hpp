// SPDX-License-Identifier: BSL-1.0
/// @file
/// What a store may keep beyond the mutex, each an interface the store implements and hands
/// out (store::latches(), store::elections()): a store that lacks one returns null, and a
/// registry that needs it is refused when it is built.
#pragma once

#include <dlock/store.hpp>

namespace dlock {

/// Count-down latches as a store keeps them (dlock::latch is built on these).
/// @completion As the store's operations: on its executor, never inside the initiating call.
/// @cancellation As the store's (see store).
/// @threadsafety None: use it from the store's executor only.
class DLOCK_API latch_capability {
public:
    /// async_count_down's completion: the error, and the count-downs still missing.
    using count_down_signature = void(boost::system::error_code, std::uint64_t);
    /// async_latch_state's completion: the error, and the latch as the store keeps it.
    using latch_state_signature = void(boost::system::error_code, latch_state);

    /// Counts `member` down on the latch `name` of `count`, once per member however often it
    /// is repeated (so a retry after a lost reply, or a second process with the same member,
    /// counts once), and sets the latch's expiry to `ttl` from now (on etcd and ZooKeeper the
    /// ttl of the latch's first count-down: its lease's, its TTL node's). Completes with the
    /// count-downs still missing (0: done). The count-down that brings it to 0 wakes the
    /// name's watchers (watch_event::released). The first count-down creates the latch with
    /// `count`; a later one with another count fails with error::count_mismatch and changes
    /// nothing.
    /// @completion count_down_signature: `void(error_code, remaining)`.
    /// @errors invalid_option (count 0 or above max_latch_count, an empty member),
    /// invalid_lease (a ttl the store cannot set), count_mismatch, the store's.
    /// @cancellation As the store's; a cancelled count-down may have counted.
    template <class Token = boost::asio::deferred_t>
    auto async_count_down(const std::string& name, const std::string& member, std::uint64_t count,
                          std::chrono::milliseconds ttl, Token&& tok = {})
    {
        return boost::asio::async_initiate<Token, count_down_signature>(
            [this](auto h, const std::string& n, const std::string& m, std::uint64_t c, std::chrono::milliseconds t) {
                do_count_down(n, m, c, t, std::move(h));
            },
            tok, name, member, count, ttl);
    }

    /// The latch `name` as the store keeps it ({0, 0} if there is none). Changes nothing.
    /// @completion latch_state_signature: `void(error_code, latch_state)`.
    /// @errors The store's.
    /// @cancellation As the store's.
    template <class Token = boost::asio::deferred_t>
    auto async_latch_state(const std::string& name, Token&& tok = {})
    {
        return boost::asio::async_initiate<Token, latch_state_signature>(
            [this](auto h, const std::string& n) { do_latch_state(n, std::move(h)); }, tok, name);
    }

protected:
    /// Not deleted through this interface: the store owns it.
    ~latch_capability() = default;
    /// async_count_down.
    virtual void do_count_down(const std::string& name, const std::string& member, std::uint64_t count,
                               std::chrono::milliseconds ttl,
                               boost::asio::any_completion_handler<count_down_signature> h) = 0;
    /// async_latch_state.
    virtual void do_latch_state(const std::string& name,
                                boost::asio::any_completion_handler<latch_state_signature> h) = 0;
};

/// Elections' values as a store keeps them (dlock::election and leader_observer are built on
/// these and the mutex).
/// @completion As the store's operations: on its executor, never inside the initiating call.
/// @cancellation As the store's (see store).
/// @threadsafety None: use it from the store's executor only.
class DLOCK_API election_capability {
public:
    /// async_proclaim's completion: the error, and whether the value was written.
    using proclaim_signature = void(boost::system::error_code, bool);
    /// async_leader's completion: the error, and the holder with its value.
    using leader_signature = void(boost::system::error_code, lock_status);

    /// Stores `value` with the lease `key` (as lock_status::value) if that lease still holds
    /// the name, and wakes the name's watchers (watch_event::released) so that observers
    /// read it. false: the lease no longer holds the name; nothing was written. The value
    /// goes with the lease: a release, an expiry or a hand-off drops it.
    /// @completion proclaim_signature: `void(error_code, bool written)`.
    /// @errors The store's.
    /// @cancellation As the store's; a cancelled write may still land.
    template <class Token = boost::asio::deferred_t>
    auto async_proclaim(const lease_key& key, const std::string& value, Token&& tok = {})
    {
        return boost::asio::async_initiate<Token, proclaim_signature>(
            [this](auto h, const lease_key& k, const std::string& v) { do_proclaim(k, v, std::move(h)); }, tok, key,
            value);
    }

    /// The name's holder with its proclaimed value (lock_status::value): held, fencing_token,
    /// ttl, holder, value. Changes nothing.
    /// @completion leader_signature: `void(error_code, lock_status)`.
    /// @errors The store's.
    /// @cancellation As the store's.
    template <class Token = boost::asio::deferred_t>
    auto async_leader(const std::string& name, Token&& tok = {})
    {
        return boost::asio::async_initiate<Token, leader_signature>(
            [this](auto h, const std::string& n) { do_leader(n, std::move(h)); }, tok, name);
    }

protected:
    /// Not deleted through this interface: the store owns it.
    ~election_capability() = default;
    /// async_proclaim.
    virtual void do_proclaim(const lease_key& key, const std::string& value,
                             boost::asio::any_completion_handler<proclaim_signature> h) = 0;
    /// async_leader.
    virtual void do_leader(const std::string& name, boost::asio::any_completion_handler<leader_signature> h) = 0;
};

}  // namespace dlock
