// The PostgreSQL store: leases as rows of one table, taken and renewed by single statements
// judged on the server's clock, fencing tokens from a sequence, releases announced by NOTIFY.
#pragma once

#include <dlock/postgres/config.hpp>
#include <dlock/store.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace dlock {

/// The store contract over one PostgreSQL server (libpq, non-blocking on the executor).
///
/// Table `<table>` (name text primary key, owner, fence, expires_at timestamptz, contended)
/// and sequence `<table>_fence`, created on first use if missing. A lease is free when its
/// row is missing or `expires_at <= clock_timestamp()` on the server (clients' clocks are
/// never compared). Acquire is one INSERT .. ON CONFLICT DO UPDATE .. WHERE (a refused one
/// asks a second, small UPDATE for the holder's remaining lease and marks it contended);
/// renew one UPDATE; release one DELETE with `pg_notify('dlock', name)` in the same statement.
/// A second connection LISTENs on `dlock` and wakes the watchers of the released name.
///
/// Limits (also in traits()): one primary (a replica promoted without the latest commits
/// may give a lock twice); no direct hand-off (woken waiters retry); names are text of at
/// most 2000 bytes without NUL (invalid_name otherwise); leases of 1 ms .. 30 days.
///
/// Errors: connect_failed, resolve_failed, connection_lost, timeout, server_busy
/// (transient); auth_failed (wrong password or user), handshake_failed (no such database),
/// permission_denied (missing privileges), server_error (any other SQL error; its text in
/// last_error_text()), invalid_name, invalid_lease.
/// Thread safety: none; use it from its executor.
class postgres_store final : public store {
public:
    postgres_store(boost::asio::any_io_executor ex, postgres::config cfg);
    ~postgres_store() override;

    boost::asio::any_io_executor get_executor() const override;
    /// Per lease, durable fencing, release notifications, no direct hand-off, 1 ms granularity.
    store_traits traits() const noexcept override;
    /// "postgresql postgresql://user@host:port/db table=dlock_locks".
    std::string describe() const override;
    /// `ready` once the listening connection runs LISTEN, `released` on each release of
    /// `name`, `resync` after the listener reconnects.
    watch_id watch(const std::string& name, const std::string& token, watch_callback cb) override;
    using store::watch;
    void unwatch(watch_id id) override;
    /// Closes both connections: pending operations complete with error::closed.
    void close() override;

    const postgres::config& config() const noexcept;

private:
    void do_connect(boost::asio::any_completion_handler<connect_signature> h) override;
    void do_try_acquire(const lease_request& req, boost::asio::any_completion_handler<acquire_signature> h) override;
    void do_renew(const lease_key& key, std::chrono::milliseconds ttl,
                  boost::asio::any_completion_handler<renew_signature> h) override;
    void do_release(const lease_key& key, boost::asio::any_completion_handler<bool_signature> h) override;
    void do_force_release(const std::string& name, boost::asio::any_completion_handler<bool_signature> h) override;
    void do_status(const std::string& name, boost::asio::any_completion_handler<status_signature> h) override;

    struct impl;
    std::shared_ptr<impl> impl_;
};

}  // namespace dlock
