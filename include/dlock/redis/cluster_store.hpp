// SPDX-License-Identifier: BSL-1.0
/// @file
/// The Redis Cluster store: redis_store's scripts routed to the master of each name's slot,
/// following MOVED and ASK, with wake-ups through sharded pub/sub.
#pragma once

#include <dlock/capabilities.hpp>
#include <dlock/export.hpp>
#include <dlock/redis/config.hpp>
#include <dlock/store.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dlock {

/// Settings of a cluster_store beyond the node configs.
struct cluster_options {
    /// Redirections (MOVED, ASK) followed per operation before it fails with
    /// error::server_error. Zero: never follow one.
    int max_redirects = 5;
    /// Pause before routing again after TRYAGAIN or CLUSTERDOWN (a migration in progress).
    std::chrono::milliseconds tryagain_delay{20};
    /// How long an operation keeps routing again after TRYAGAIN or CLUSTERDOWN before it
    /// fails with error::server_busy, having changed nothing. Not counted in max_redirects
    /// (nor is an ASK that led to it): a script that may delete a key declares a key never
    /// written, so it gets TRYAGAIN for as long as its slot migrates, and a script over
    /// several keys of a name for as long as they are split between two masters.
    std::chrono::milliseconds tryagain_limit{2000};
};

/// Counters of a cluster_store, readable at any time on its executor.
struct cluster_stats {
    std::uint64_t moved = 0;                ///< MOVED replies followed (commands and subscriptions)
    std::uint64_t ask = 0;                  ///< ASK replies followed (ASKING sent to the target)
    std::uint64_t tryagain = 0;             ///< TRYAGAIN / CLUSTERDOWN replies waited out
    std::uint64_t redirect_failures = 0;    ///< operations that ran out of max_redirects
    std::uint64_t refreshes = 0;            ///< slot map reads started (CLUSTER SLOTS)
    std::uint64_t refresh_failures = 0;     ///< reads for which no node answered usably
    std::uint64_t resubscribes = 0;         ///< channels moved to another master's subscription
    std::uint64_t server_unsubscribes = 0;  ///< channels the server dropped (its slot left the node)
};

/// The store contract over a Redis Cluster (Redis 7.0+ for sharded pub/sub).
///
/// - Keys: exactly redis_store's (`{T}<ns>:lock:<name>`, `{T}<ns>:fence`,
///   `{T}<ns>:released:<name>`), all in the name's hash slot, so each script runs on one
///   master and a store over a single node and one over a cluster name the same keys.
/// - Routing: the topology is read with CLUSTER SLOTS from any reachable seed (then from
///   the known masters), lazily on first use. Each script goes to the master of the name's
///   slot over one pipelined redis::connection per master, created on first use with the
///   first seed's settings (password, TLS, timeouts) and the announced host and port.
///   `-MOVED` updates that slot's entry, starts a background re-read of the whole map and
///   retries on the new master; `-ASK` retries once on the target as `ASKING` + the script
///   in one request; `-TRYAGAIN` (a multi-key script while its keys are split by a
///   migration, or one that may delete a key while its slot migrates: Redis refuses a
///   command on a deleted key mid-script there, leaving the script half done) waits
///   `tryagain_delay` and routes again. After `max_redirects` the
///   operation fails with error::server_error (the last redirection's text in the reply).
///   A lost connection or a timeout is reported as such (the lock retries) and re-reads
///   the map, since the master may have failed over.
/// - Wake-ups: each watched name's channel is SSUBSCRIBEd on the master owning its slot
///   (one push connection per master). When the slot moves (the server sends
///   `sunsubscribe`, a MOVED reply, a new map) or the connection drops, the channel is
///   subscribed again where the slot now lives and watchers get watch_event::resync.
///   Releases publish with SPUBLISH.
/// - Hand-off and sets: redis_store's queue and grant channels (a waiter's grant channel is
///   SSUBSCRIBEd with its name's channel, in the same slot), and its read-write lock and
///   semaphore scripts; a queued waiter whose grant channel has no subscriber on the slot's
///   master (PUBSUB SHARDNUMSUB) is passed over, so one caught by a slot move re-queues at
///   the back when its resync retries.
/// - Fencing tokens: the counter `{T}<ns>:fence` lives on the master of slot T and moves
///   with the slot in a migration (MIGRATE copies it), so tokens stay strictly increasing
///   per name across resharding and restarts with persistence, *as long as the slot's
///   master does not lose acknowledged writes*. Redis Cluster replicates asynchronously: a
///   failover to a replica that had not yet received the latest INCR can issue a token
///   again, and the lease itself can be lost the same way (two holders). Redis Cluster is
///   not strongly consistent; use the tokens with a resource that rejects stale ones, and
///   consider WAIT-based or Redlock stores where that matters.
/// - Executor and thread safety as redis_store: single-threaded executor, not thread-safe.
/// - Lifetime: the destructor closes every connection; operations still pending complete
///   with error::closed. Background work holds internal state only, never the store.
///
/// @cancellation The operation's cancellation slot follows the request in flight (see
/// redis::connection::async_exec) and the TRYAGAIN pause; an operation waiting for the
/// first topology read is not cancellable (the read is bounded by connect_timeout).
/// @threadsafety None: one single-threaded executor, as redis_store.
class DLOCK_API cluster_store final : public store, public latch_capability, public election_capability {
public:
    /// `seeds`: some nodes of the cluster (any role); the first one's settings are used for
    /// every master. Does no I/O until the first operation or watch.
    cluster_store(boost::asio::any_io_executor ex, std::vector<redis::config> seeds, std::string ns = "dlock",
                  cluster_options opts = {});
    /// One seed node.
    cluster_store(boost::asio::any_io_executor ex, redis::config seed, std::string ns = "dlock",
                  cluster_options opts = {});
    /// Closes the store (as close()): pending operations complete with error::closed.
    ~cluster_store() override;
    cluster_store(const cluster_store&) = delete;
    cluster_store& operator=(const cluster_store&) = delete;

    boost::asio::any_io_executor get_executor() const override;
    /// Direct hand-off, read-write locks and semaphores, leases up to 2^46 ms: as redis_store.
    store_traits traits() const noexcept override;
    /// "redis-cluster <seeds> ns=<ns>", passwords never shown.
    std::string describe() const override;
    using store::watch;
    /// With a token, its grant channel too (the direct hand-off), on the same master.
    watch_id watch(const std::string& name, const std::string& token, watch_callback cb) override;
    void unwatch(watch_id id) override;

    /// Closes every connection: pending operations complete with error::closed.
    void close() override;

    /// Latches and elections: redis_store's scripts and keys, in the name's slot, their
    /// notifications on sharded pub/sub (count_down's `done`, proclaim's `leader`).
    latch_capability* latches() noexcept override;
    election_capability* elections() noexcept override;

    /// Re-reads the slot map now (it is also re-read by itself after MOVED and lost
    /// connections).
    /// @completion `void(error_code)`, on the store's executor (always posted).
    /// @errors connect_failed (or the last seed's error) if no node answered, closed.
    /// @cancellation Not cancellable (the read is bounded by connect_timeout).
    template <class Token = boost::asio::deferred_t>
    auto async_refresh(Token&& tok = {})
    {
        return boost::asio::async_initiate<Token, void(boost::system::error_code)>(
            [this](auto h) { refresh_impl(std::move(h)); }, tok);
    }

    /// "host:port" of the master serving `name` in the current map; empty if not known yet.
    std::string master_of(const std::string& name) const;
    /// "host:port" of every master in the current map.
    std::vector<std::string> masters() const;
    /// Counters since construction.
    const cluster_stats& stats() const noexcept;

    /// `{T}<ns>:lock:<name>`, the lease's hash (key names are redis_store's; for tools and tests).
    std::string lock_key(const std::string& name) const;
    /// `{T}<ns>:fence`, the fencing counter of `name`'s slot.
    std::string fence_key(const std::string& name) const;
    /// `{T}<ns>:released:<name>`, the channel a release publishes on (SPUBLISH).
    std::string channel(const std::string& name) const;

private:
    void do_try_acquire(const lease_request& req, boost::asio::any_completion_handler<acquire_signature> h) override;
    void do_renew(const lease_key& key, std::chrono::milliseconds ttl,
                  boost::asio::any_completion_handler<renew_signature> h) override;
    void do_release(const lease_key& key, boost::asio::any_completion_handler<bool_signature> h) override;
    // Keeps a server's error text on this store if it still exists when the reply comes.
    std::function<void(std::string)> text_keeper();
    void release_mutex(const std::string& name, const std::string& token, bool force,
                       boost::asio::any_completion_handler<bool_signature> h);
    // force: '0' the token's own lease; the operator's: '1' every lease, 'r' readers, 'w' the writer.
    void release_set(const std::string& name, const std::string& token, char force,
                     boost::asio::any_completion_handler<bool_signature> h);
    void do_force_release(const std::string& name, lease_kind side,
                          boost::asio::any_completion_handler<bool_signature> h) override;
    void do_status(const std::string& name, boost::asio::any_completion_handler<status_signature> h) override;
    void do_count_down(const std::string& name, const std::string& member, std::uint64_t count,
                       std::chrono::milliseconds ttl,
                       boost::asio::any_completion_handler<count_down_signature> h) override;
    void do_latch_state(const std::string& name, boost::asio::any_completion_handler<latch_state_signature> h) override;
    void do_proclaim(const lease_key& key, const std::string& value,
                     boost::asio::any_completion_handler<proclaim_signature> h) override;
    void do_leader(const std::string& name, boost::asio::any_completion_handler<leader_signature> h) override;
    void do_connect(boost::asio::any_completion_handler<connect_signature> h) override;
    void refresh_impl(boost::asio::any_completion_handler<void(boost::system::error_code)> h);

    struct impl;
    std::shared_ptr<impl> impl_;
};

}  // namespace dlock
