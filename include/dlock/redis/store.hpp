// SPDX-License-Identifier: BSL-1.0
/// @file
/// The Redis store: one round trip per operation through Lua scripts, pub/sub wake-ups.
#pragma once

#include <dlock/capabilities.hpp>
#include <dlock/export.hpp>
#include <dlock/redis/config.hpp>
#include <dlock/redis/connection.hpp>
#include <dlock/redis/subscriber.hpp>
#include <dlock/store.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace dlock {

/// Keys, all in one hash slot per name so that Redis Cluster can run the scripts:
///   `{T}<ns>:lock:<name>`   hash {owner, fence[, value]} with the lease as its PX expiry
///                           (value: the leader's, elections; written by the proclaim script)
///   `{T}<ns>:fence`         the fencing counter of slot T, never expiring, never reset
///   `{T}<ns>:released:<name>` the pub/sub channel a release publishes on
///   `{T}<ns>:queue:<name>`  list of queued waiters' tokens (direct hand-off), and
///   `{T}<ns>:queue-ttl:<name>` hash token -> lease each asked for; both expire
///   `{T}<ns>:granted:<name>:<token>` the channel a queued waiter hears its hand-off on
///   `{T}<ns>:latch:<name>`  a count-down latch's hash {count, done}, and
///   `{T}<ns>:latch-members:<name>` the set of members that counted it down; both expire
///                           the latch's ttl after its latest count-down
/// where T is a short tag chosen to hash to the same slot as `<name>`, so counters are
/// bounded (one per slot) while locks still spread over the cluster.
///
/// Store settings beyond the connection's.
struct redis_store_options {
    /// Namespace of every key.
    std::string ns = "dlock";
    /// After each acquire, wait (Redis WAIT) until this many replicas hold the new lease, so
    /// a failover to one of them keeps it; fewer within `wait_timeout` → the lease is given
    /// back and the acquire fails with error::not_replicated. 0: don't wait.
    int wait_replicas = 0;
    /// Bound of that wait. Zero is not allowed (WAIT 0 blocks forever); it means 1 ms.
    /// WAIT holds up the command connection: requests pipelined behind it (renewals of
    /// other locks included) wait up to this long, so keep it well under the lease / 3.
    std::chrono::milliseconds wait_timeout{100};
    /// true: each operation is one Lua script (EVALSHA). false: the no-scripting mode, for
    /// servers that refuse scripts (ACL `-@scripting`, managed services without EVAL): the
    /// same keys, fencing counter, renewal and release run as WATCH/MULTI/EXEC transactions
    /// on a connection of their own, one at a time, retried on a WATCH conflict (up to 32
    /// times, then error::server_busy). Each operation costs two round trips, and there is
    /// no direct hand-off (traits().direct_handoff is false): a release wakes waiters by
    /// pub/sub and they retry. Needs WATCH, MULTI, EXEC, UNWATCH, HMGET, HSET, HDEL, PTTL,
    /// PEXPIRE, INCR, GET, LLEN, UNLINK, PUBLISH, SUBSCRIBE. The `dlock` tool: --no-scripting.
    bool scripting = true;
};

/// The store contract over one Redis (direct or through Sentinel).
///
/// Errors: the connection's (connection_lost, timeout, closed, ...); a server error reply
/// as its own code, with the server's text in last_error_text(): NOPERM → permission_denied
/// (e.g. an ACL without EVAL/EVALSHA: async_connect checks that scripts may run, and says
/// so at once; see redis_store_options::scripting), WRONGTYPE → wrong_type (a key of the namespace holds
/// another type), LOADING/BUSY/MASTERDOWN/READONLY/... → server_busy (transient), anything
/// else → server_error; a lease outside 1 ms..2^46 ms → invalid_lease, before sending.
/// Watches: no callback after unwatch() returns (the subscriber guarantees it per listener).
/// @cancellation A script call passes the operation's cancellation slot to its request, as
/// redis::connection::async_exec honours it: terminal, partial and total before the request is
/// written, terminal and partial after (the script may then have run: a cancelled acquire may
/// have taken the lease). Not honoured by async_connect, by a renewal sent in one batch with
/// others, or with scripting off (transactions).
/// @threadsafety None: one single-threaded executor, as redis::connection.
class DLOCK_API redis_store final : public store, public latch_capability, public election_capability {
public:
    /// Opens two connections: one for commands, one subscriber. `ns` namespaces all keys.
    redis_store(boost::asio::any_io_executor ex, redis::config cfg, std::string ns = "dlock");
    /// The same with every store setting (`opts.ns` namespaces all keys).
    redis_store(boost::asio::any_io_executor ex, redis::config cfg, redis_store_options opts);
    /// Destroys both connections, which closes them: pending operations complete with error::closed.
    ~redis_store() override;

    boost::asio::any_io_executor get_executor() const override;
    /// direct_handoff unless wait_replicas is set or scripting is off (a hand-off inside a release cannot be
    /// WAITed for); mutex leases of 1 ms up to 2^46 ms (Redis refuses expiry times that
    /// overflow; longer ones fail with error::invalid_lease before anything is sent).
    store_traits traits() const noexcept override;
    /// Latches and elections, one script each: null with scripting off (transactions keep neither).
    latch_capability* latches() noexcept override;
    election_capability* elections() noexcept override;
    /// "redis redis://host:port/db" (or the Sentinel master), password never shown.
    std::string describe() const override;
    using store::watch;
    /// With a token: subscribes the name's channel and the token's grant channel; `ready`
    /// once both are confirmed.
    watch_id watch(const std::string& name, const std::string& token, watch_callback cb) override;
    void unwatch(watch_id id) override;

    /// The command connection (shared by every lock; usable for your own commands).
    redis::connection& connection() noexcept;
    /// The pub/sub connection that carries release notifications.
    redis::subscriber& subscriber() noexcept;

    /// Closes both connections: pending operations complete with error::closed and the
    /// io_context runs out of work once the locks are idle.
    void close() override;

    /// `{T}<ns>:lock:<name>`, the lease's hash (key names are for tools and tests).
    std::string lock_key(const std::string& name) const;
    /// `{T}<ns>:fence`, the fencing counter of `name`'s slot.
    std::string fence_key(const std::string& name) const;
    /// `{T}<ns>:released:<name>`, the channel a release publishes on.
    std::string channel(const std::string& name) const;
    /// `{T}<ns>:queue:<name>`, the queued waiters' tokens.
    std::string queue_key(const std::string& name) const;
    /// `{T}<ns>:queue-ttl:<name>`, the lease each queued token asked for.
    std::string queue_ttl_key(const std::string& name) const;
    /// `{T}<ns>:granted:<name>:<token>`, the channel `token` hears its hand-off on.
    std::string grant_channel(const std::string& name, const std::string& token) const;
    /// `{T}<ns>:latch:<name>`, a count-down latch's hash {count, done}.
    std::string latch_key(const std::string& name) const;
    /// `{T}<ns>:latch-members:<name>`, the set of members that counted the latch down.
    std::string latch_members_key(const std::string& name) const;

private:
    void do_connect(boost::asio::any_completion_handler<connect_signature> h) override;
    void do_try_acquire(const lease_request& req, boost::asio::any_completion_handler<acquire_signature> h) override;
    void try_acquire_set(const lease_request& req, boost::asio::any_completion_handler<acquire_signature> h);
    boost::asio::any_completion_handler<acquire_signature>
    then_wait_replicas(const std::string& name, const std::string& token,
                       boost::asio::any_completion_handler<acquire_signature> h);
    // force: '0' the token's own lease; the operator's: '1' every lease, 'r' readers, 'w' the writer.
    void set_release(const std::string& name, const std::string& token, char force,
                     boost::asio::any_completion_handler<bool_signature> h);
    void release(const std::string& name, const std::string& token, bool force,
                 boost::asio::any_completion_handler<bool_signature> h);
    void do_renew(const lease_key& key, std::chrono::milliseconds ttl,
                  boost::asio::any_completion_handler<renew_signature> h) override;
    void do_release(const lease_key& key, boost::asio::any_completion_handler<bool_signature> h) override;
    void flush_renewals();
    boost::system::error_code scripts_refused(const std::string& text);
    error_text_keeper text_keeper() { return keep_error_text(); }
    void do_force_release(const std::string& name, lease_kind side,
                          boost::asio::any_completion_handler<bool_signature> h) override;
    void do_status(const std::string& name, boost::asio::any_completion_handler<status_signature> h) override;

    // Count-down latches: one script each (scripting off: error::not_supported).
    void do_count_down(const std::string& name, const std::string& member, std::uint64_t count,
                       std::chrono::milliseconds ttl,
                       boost::asio::any_completion_handler<count_down_signature> h) override;
    void do_latch_state(const std::string& name, boost::asio::any_completion_handler<latch_state_signature> h) override;

    // Elections: the leader's value in the lock hash (scripting off: error::not_supported).
    void do_proclaim(const lease_key& key, const std::string& value,
                     boost::asio::any_completion_handler<proclaim_signature> h) override;
    void do_leader(const std::string& name, boost::asio::any_completion_handler<leader_signature> h) override;

    struct impl;
    std::unique_ptr<impl> impl_;
};

/// The Redis Cluster hash slot of a key (CRC16/XMODEM of its hash tag, mod 16384).
DLOCK_API unsigned key_slot(std::string_view key) noexcept;

/// A short tag that hashes to `slot`.
DLOCK_API const std::string& slot_tag(unsigned slot);

}  // namespace dlock
