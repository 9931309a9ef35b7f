// SPDX-License-Identifier: BSL-1.0
/// @file
/// The MariaDB/MySQL store: leases as rows of one table judged on the server's clock, fencing
/// tokens from a sequence, waiters woken through the holder's GET_LOCK.
#pragma once

#include <dlock/capabilities.hpp>
#include <dlock/export.hpp>
#include <dlock/mariadb/config.hpp>
#include <dlock/store.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace dlock {

/// The store contract over one MariaDB server (10.6+: sequences, DELETE .. RETURNING,
/// compound statements, SKIP LOCKED; MariaDB Connector/C's non-blocking API, driven on the
/// executor).
///
/// Table `<table>` (name varbinary primary key, owner, fence, expires_at, contended,
/// signal_conn; value and value_owner for elections), sequence `<table>_fence` and hand-off
/// queue `<table>_queue`, created on first use if missing; read-write locks and semaphores in
/// `<table>_set` and `<table>_set_queue`, latches in `<table>_latch` and
/// `<table>_latch_member`, and the doorbell's `<table>_bell` (ENGINE=MEMORY), each made if
/// missing and the user may (without them the mutex works and those fail with server_error).
/// A lease is free when its row is missing or `expires_at <= UTC_TIMESTAMP(6)` on the server
/// (clients' clocks are never compared). Every operation is one round trip (a multi-statement
/// text query, or one compound statement in one transaction; names and tokens go in as hex
/// literals, which no character set or sql_mode can turn into SQL).
///
/// Wake-ups (MariaDB has no NOTIFY): each store keeps a sleeper connection in `SLEEP` while
/// it watches anything, enrolled for the names it watches in `<table>_bell`. A change (a
/// release, a hand-off, a set's grant, a proclaim, the last count-down) counts a ring on the
/// name's rows in its own statement, and the store that made it sends `KILL QUERY` to the
/// enrolled sleepers (on a connection of its own) before the operation completes; the sleeper
/// reads the rings (and the name's new holder: a hand-off's grant) and its watchers hear
/// them. A ring is never lost: a sleeper sleeps only if its rows are as it last read them.
/// KILL needs the same user (or CONNECTION ADMIN): other users' waiters, and any waiter when
/// the bell table is missing, sleep their holder's remaining lease: slower, never wrong. The
/// mutex's waiters also block in `GET_LOCK` on the holder's signal lock (wait_connections).
///
/// Hand-off: a queued waiter (its sleeper alive, checked by the sleeper's own named lock) is
/// given the name by the holder's release, with a new fence, in queue order; read-write
/// locks and semaphores serve their queue in the same way (writers are not starved).
///
/// Limits (also in traits()): one primary (asynchronous replicas promoted without the latest
/// commits may give a lock twice); names are bytes, 1..2000 of them, tokens 1..255
/// (invalid_name otherwise); leases of 1 ms .. 30 days; an expired lease goes to whoever
/// asks first, not in queue order.
///
/// Errors: connect_failed, resolve_failed, connection_lost, timeout, server_busy (lock wait
/// timeout, deadlock, too many connections) (transient); auth_failed (wrong password or
/// user), handshake_failed (no such database), permission_denied (a missing privilege, the
/// database refused to the user), server_error (any other SQL error; its text in
/// last_error_text()), invalid_name, invalid_lease.
/// @cancellation Not honoured: each request is bounded by the configured timeouts.
/// @threadsafety None: use it from its executor only.
class DLOCK_API mariadb_store final : public store, public latch_capability, public election_capability {
public:
    /// A store on `ex`; it connects at first use (or async_connect). A table name that
    /// mariadb::check_table refuses is replaced by "dlock_locks" (parse_url refuses it).
    mariadb_store(boost::asio::any_io_executor ex, mariadb::config cfg);
    /// Closes the store (as close()): pending operations complete with error::closed.
    ~mariadb_store() override;

    boost::asio::any_io_executor get_executor() const override;
    /// Per lease, durable fencing, release notifications, direct hand-off, read-write locks,
    /// semaphores and elections, 1 ms granularity.
    store_traits traits() const noexcept override;
    /// "mariadb mariadb://user@host:port/db table=dlock_locks".
    std::string describe() const override;
    /// `ready` once the name is enrolled at the doorbell (at once if the bell table is missing:
    /// the waiters then sleep their bound), `released` at each ring or when a GET_LOCK wait on
    /// the holder's named lock returns, `resync` when a wait connection fails or the sleeper
    /// reconnects, and with a `token`, `granted` when a release hands `name` to it.
    watch_id watch(const std::string& name, const std::string& token, watch_callback cb) override;
    using store::watch;
    void unwatch(watch_id id) override;
    /// Closes every connection: pending operations complete with error::closed.
    void close() override;

    /// The settings in use.
    const mariadb::config& config() const noexcept;

    /// Elections on the name's row: the leader is its lease's owner, a proclaimed value its
    /// `value` column (counted only while the lease that wrote it owns the row); a new leader
    /// and each proclaim ring the doorbell.
    election_capability* elections() noexcept override { return this; }
    /// Count-down latches in `<table>_latch` and `<table>_latch_member`, counted in the
    /// latch's turn; the last count-down rings the doorbell.
    latch_capability* latches() noexcept override { return this; }

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
    void acquire_in_set(const lease_request& req, boost::asio::any_completion_handler<acquire_signature> h);
    void release_in_set(const std::string& name, const std::string& token, bool force,
                        boost::asio::any_completion_handler<bool_signature> h);
    void do_count_down(const std::string& name, const std::string& member, std::uint64_t count,
                       std::chrono::milliseconds ttl,
                       boost::asio::any_completion_handler<count_down_signature> h) override;
    void do_latch_state(const std::string& name, boost::asio::any_completion_handler<latch_state_signature> h) override;

    std::shared_ptr<impl> impl_;
};

}  // namespace dlock
