// SPDX-License-Identifier: BSL-1.0
/// @file
/// The PostgreSQL store: leases as rows of one table, taken and renewed by single statements
/// judged on the server's clock, fencing tokens from a sequence, releases announced by NOTIFY.
#pragma once

#include <dlock/capabilities.hpp>
#include <dlock/export.hpp>
#include <dlock/postgres/config.hpp>
#include <dlock/store.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace dlock {

/// The store contract over one PostgreSQL server (libpq, non-blocking on the executor).
///
/// Table `<table>` (name text primary key, owner, fence, expires_at timestamptz, contended,
/// was_contended, value and value_owner: an election's proclaimed value and whose it is), sequence `<table>_fence` and
/// hand-off queue `<table>_queue`, created on first use if missing (an older `<table>` gains the queue and its new
/// column). A lease is free when its row is missing or `expires_at <= clock_timestamp()` on the server (clients' clocks
/// are never compared). Acquire is one INSERT .. ON CONFLICT DO UPDATE that takes a free, expired or own row, else
/// marks it contended and (lease_request::queue) queues the token; renew is one UPDATE; release is one statement that
/// hands the name to the first queued token whose listening backend still exists (new fence, NOTIFY `dlock_grant`) or
/// deletes the row (NOTIFY `dlock`). A second connection LISTENs on both channels.
/// Read-write locks and semaphores: `<table>_set` and `<table>_set_queue`, changed only by
/// the PL/pgSQL functions `<table>_set_acquire_v1`, `_set_renew_v1`, `_set_release_v1` and `_set_release_side_v1` in
/// the name's turn (docs/stores/postgres.md); latches: `<table>_latch`, `<table>_latch_member` and
/// `<table>_count_down_v1`. Those tables and functions are made if missing when the user may; without them the mutex
/// works and these fail with server_error.
///
/// Limits (also in traits()): one primary (a replica promoted without the latest commits
/// may give a lock twice); a waiter is judged alive by its listener's backend pid (a pid
/// reused by then makes a hand-off go to a dead waiter: the lease then ends on its own);
/// names are text of at most 2000 bytes without NUL (invalid_name otherwise); leases of
/// 1 ms .. 30 days. Privileges: SELECT, INSERT, UPDATE, DELETE on both tables and USAGE on
/// the sequence; CREATE on the schema only to create them.
///
/// Errors: connect_failed, resolve_failed, connection_lost, timeout, server_busy
/// (transient); auth_failed (wrong password or user), handshake_failed (no such database),
/// permission_denied (missing privileges), server_error (any other SQL error; its text in
/// last_error_text()), invalid_name, invalid_lease.
/// @cancellation Not honoured: each request is bounded by the configured timeouts.
/// @threadsafety None: use it from its executor only.
class DLOCK_API postgres_store final : public store, public latch_capability, public election_capability {
public:
    /// A store on `ex`; it connects at first use (or async_connect). A table name that
    /// postgres::check_table refuses is replaced by "dlock_locks" (parse_url refuses it).
    postgres_store(boost::asio::any_io_executor ex, postgres::config cfg);
    /// Closes the store (as close()): pending operations complete with error::closed.
    ~postgres_store() override;

    boost::asio::any_io_executor get_executor() const override;
    /// Per lease, durable fencing, release notifications, direct hand-off, 1 ms granularity.
    store_traits traits() const noexcept override;
    /// "postgresql postgresql://user@host:port/db table=dlock_locks".
    std::string describe() const override;
    /// `ready` once the listening connection runs LISTEN, `released` on each release of
    /// `name`, `resync` after the listener reconnects, and with a `token`, `granted` when a
    /// release hands `name` to it.
    watch_id watch(const std::string& name, const std::string& token, watch_callback cb) override;
    using store::watch;
    void unwatch(watch_id id) override;
    /// Closes both connections: pending operations complete with error::closed.
    void close() override;

    /// The settings in use.
    const postgres::config& config() const noexcept;

    /// Elections on the name's row: the leader is its lease's owner, a proclaimed value its
    /// `value` column (counted only while the lease that wrote it owns the row), announced
    /// by NOTIFY.
    election_capability* elections() noexcept override { return this; }
    /// Count-down latches in tables `<table>_latch` and `<table>_latch_member`, counted by the
    /// function `<table>_count_down_v1` in the latch's own turn; the last count-down NOTIFYs.
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
