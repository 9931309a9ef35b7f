// SPDX-License-Identifier: BSL-1.0
/// @file
/// The ZooKeeper store: the lock recipe of ZooKeeper's docs in Apache Curator's node layouts
/// (InterProcessMutex, InterProcessReadWriteLock, LeaderLatch, InterProcessSemaphoreV2), on the io_context through the
/// C client's single-threaded library, with one ZooKeeper session per store.
#pragma once

#include <dlock/capabilities.hpp>
#include <dlock/export.hpp>
#include <dlock/store.hpp>
#include <dlock/zookeeper/config.hpp>

#include <memory>
#include <string>

namespace dlock {

/// Nodes: the lock of name N is the path `<root>/<N>` (a container node: the servers delete
/// it once empty); each contender creates `<root>/<N>/_c_<guid>-lock-<sequence>` (ephemeral,
/// sequential; the guid is derived from the lease token, data = the token), exactly as
/// Curator's InterProcessMutex does, so dlock and Curator on the same path exclude each
/// other. The lowest sequence holds; a waiter watches only the node just before its own (a
/// data watch: FIFO, no herd, no polling); a create whose reply was lost is found again by
/// its guid. Fencing token = the node's czxid (strictly increasing across the ensemble,
/// durable), not its sequence number. A read-write lock's readers and writers create
/// `_c_<guid>-__READ__<sequence>` and `_c_<guid>-__WRIT__<sequence>` under the same path, as
/// Curator's InterProcessReadWriteLock (a reader waits only for the first writer before it);
/// an election's candidates `_c_<guid>-latch-<sequence>`, as Curator's LeaderLatch, with the
/// leader's proclaimed value as the node's data (LeaderLatch's participant id). A semaphore's
/// acquirers take `<root>/<N>/locks` in turn (an InterProcessMutex) and hold a permit as an
/// ephemeral sequential node `<root>/<N>/leases/_c_<guid>-lease-of<permits>-<sequence>` while
/// the leases number at most the permits, as Curator's InterProcessSemaphoreV2 (dlock's names
/// carry the permits, so dlock users of another number are refused). A path in use as one of
/// these refuses the others with kind_mismatch.
///
/// Session: one per store, opened at first use; the client's traffic (and a request of ours
/// every third of the timeout) keeps it alive, and the watchdog's renewals only confirm that
/// each node still exists. ZooKeeper reports an expiry only after reconnecting, so the store
/// keeps its own deadline (send time of the last answered request + the negotiated timeout
/// - drift) and declares every lock of the session lost by then; after that no node of the
/// old session is trusted (the old session is closed, which deletes its nodes).
///
/// Errors: connect_failed (no server answered within connect_timeout), connection_lost and
/// timeout are transient; invalid_lease (a session timeout outside the servers' bounds),
/// invalid_name (a name that makes no ZooKeeper path), permission_denied (an ACL) and
/// wrong_type (the lock path is an ephemeral node) are permanent. last_error_text() says more.
/// @cancellation Not honoured: each request is bounded by the configured timeouts.
/// @threadsafety None: use it from its executor only.
class DLOCK_API zookeeper_store final : public store, public latch_capability, public election_capability {
public:
    /// A store on `ex`; it opens its session at first use (or async_connect).
    zookeeper_store(boost::asio::any_io_executor ex, zookeeper::config cfg);
    /// Closes the store (as close(), so it may block for one round trip): pending operations
    /// complete with error::closed.
    ~zookeeper_store() override;

    boost::asio::any_io_executor get_executor() const override;
    store_traits traits() const noexcept override;
    /// "zookeeper zk://host:port,host:port/chroot (root /dlock)".
    std::string describe() const override;
    using store::watch;
    /// Without a token: changes among the name's contenders (`released` when one goes).
    /// With a token: `ready` at once, `granted` when the token's node becomes the first.
    watch_id watch(const std::string& name, const std::string& token, watch_callback cb) override;
    void unwatch(watch_id id) override;
    session_info session() const noexcept override;
    watch_id watch_session(std::function<void(session_event, const session_info&)> cb) override;
    /// Ends the session (every node of the store goes at once) and the connection; pending
    /// operations complete with error::closed. Blocks for one round trip when connected.
    void close() override;

    /// Elections in LeaderLatch's layout: a proclaimed value is the leader's node's data.
    election_capability* elections() noexcept override { return this; }
    /// Latches in a layout of dlock's: one node `<root>/<N>/dlock-latch` (a TTL node where the
    /// servers allow them) whose data holds the count, the ttl and the members; expiry judged
    /// on the servers' clock (src/zookeeper/latch_node.hpp).
    latch_capability* latches() noexcept override;

    /// The node `token` holds or waits with under `name` (empty if none).
    std::string node_of(const std::string& name, const std::string& token) const;

    struct impl;

private:
    void do_connect(boost::asio::any_completion_handler<connect_signature> h) override;
    void do_try_acquire(const lease_request& req, boost::asio::any_completion_handler<acquire_signature> h) override;
    void do_renew(const lease_key& key, std::chrono::milliseconds ttl,
                  boost::asio::any_completion_handler<renew_signature> h) override;
    void do_release(const lease_key& key, boost::asio::any_completion_handler<bool_signature> h) override;
    void do_force_release(const std::string& name, lease_kind side,
                          boost::asio::any_completion_handler<bool_signature> h) override;
    void do_status(const std::string& name, boost::asio::any_completion_handler<status_signature> h) override;
    void do_proclaim(const lease_key& key, const std::string& value,
                     boost::asio::any_completion_handler<proclaim_signature> h) override;
    void do_leader(const std::string& name, boost::asio::any_completion_handler<leader_signature> h) override;
    void do_count_down(const std::string& name, const std::string& member, std::uint64_t count,
                       std::chrono::milliseconds ttl,
                       boost::asio::any_completion_handler<count_down_signature> h) override;
    void do_latch_state(const std::string& name, boost::asio::any_completion_handler<latch_state_signature> h) override;

    std::shared_ptr<impl> impl_;
};

}  // namespace dlock
