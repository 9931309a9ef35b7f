// SPDX-License-Identifier: BSL-1.0
/// @file
/// The etcd store: etcd's own lock recipe (concurrency.Mutex) through its JSON gateway, on
/// the io_context, with one etcd lease per store as the session.
#pragma once

#include <dlock/capabilities.hpp>
#include <dlock/etcd/config.hpp>
#include <dlock/export.hpp>
#include <dlock/store.hpp>

#include <memory>
#include <string>

namespace dlock {

/// Keys, in etcd's concurrency.Mutex layout so that `etcdctl lock <prefix><name>` and this
/// store exclude each other: `<prefix><name>/<lease id in hex>`, value = the lease token,
/// attached to the store's lease. A second token of this store on the same name at once
/// (two registries) takes `<...>-1`, and so on: etcd's Mutex reads only the create
/// revisions of the keys under `<name>/`, never their names, so that stays compatible. The
/// holder is the key created first; a waiter's key waits for the one created just before it
/// (a watch on that key alone: FIFO, no herd).
/// Fencing token = the key's create_revision (strictly increasing and durable).
///
/// Elections (lease_kind::leader) in etcd's concurrency.Election layout, which is the
/// Mutex's: a candidate puts its key with no value, and proclaim writes the value into it
/// while it is still the key it put (its create revision), so `etcdctl elect NAME` and this
/// store campaign against each other and `etcdctl elect -l NAME` shows dlock's value. Like
/// etcd's own recipes, the keys do not say whether a name is a lock or an election.
///
/// Read-write locks in etcd's contrib RWMutex layout (`<prefix><name>/read/<lease>`,
/// `<prefix><name>/write/<lease>`), semaphores (each permit a key with the value
/// `dlock-semaphore/<N>/<token>`, the first N hold) and latches in layouts of ours; the
/// name's first key says what it is, and any other kind is refused with kind_mismatch.
///
/// Session: one etcd lease per store, granted at first use with the first acquire's lease
/// (or config::lease_ttl), kept alive every TTL/3 and revoked by close(). Every lock of the
/// store is lost together when the keep-alive says the lease is gone, or when none was
/// confirmed before the local deadline (send time of the last confirmed keep-alive + TTL -
/// drift). The watchdog's renewals confirm each key (an operator may delete one).
///
/// Errors: connect_failed / connection_lost / timeout / server_busy (no leader, request
/// timed out) are transient; permission_denied, auth_failed, invalid_request and
/// protocol_error (not an etcd gateway) are permanent; invalid_lease for a lease that is not
/// whole seconds or is below the cluster's minimum. The server's text: last_error_text().
/// @cancellation Not honoured: each request is bounded by the configured timeouts.
/// @threadsafety None: use it from its executor only.
class DLOCK_API etcd_store final : public store, public election_capability, public latch_capability {
public:
    /// A store on `ex`; it connects and grants its lease at first use (or async_connect).
    etcd_store(boost::asio::any_io_executor ex, etcd::config cfg);
    /// Closes the store (as close()): pending operations complete with error::closed.
    ~etcd_store() override;

    boost::asio::any_io_executor get_executor() const override;
    store_traits traits() const noexcept override;
    /// "etcd etcd://host:port,host:port/prefix".
    std::string describe() const override;
    using store::watch;
    /// Without a token: deletions under the name and new values of its keys (a watch stream
    /// of its own), `ready` once the stream is created. With a token: `ready` at once (the
    /// queued attempt's revision anchors the wait), `granted` when the token's key becomes
    /// the first.
    watch_id watch(const std::string& name, const std::string& token, watch_callback cb) override;
    void unwatch(watch_id id) override;
    session_info session() const noexcept override;
    watch_id watch_session(std::function<void(session_event, const session_info&)> cb) override;
    /// Revokes the lease (every key of the store goes at once; bounded by a second, in the
    /// background) and closes every connection; pending operations complete with error::closed.
    void close() override;

    /// Elections in etcd's concurrency.Election layout: a candidate's key is a lock key, the
    /// first one leads, and a proclaimed value is the leader key's value.
    election_capability* elections() noexcept override { return this; }
    /// Count-down latches in a layout of ours: `<prefix><name>/latch` (value
    /// `dlock-latch/<count>`) and `<prefix><name>/member/<member>`, on an etcd lease of the
    /// latch's own whose TTL is the latch's (each count-down keeps it alive once).
    latch_capability* latches() noexcept override { return this; }

    /// The key this store's current lease holds (or queues) `name` under for `token` (empty
    /// if none).
    std::string key_of(const std::string& name, const std::string& token) const;
    /// The member requests go to now, "host:port".
    std::string current_member() const;

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
