// SPDX-License-Identifier: BSL-1.0
// A throwaway PostgreSQL 15 server on a free loopback port, for tests.
#pragma once

#include <dlock/postgres/config.hpp>

#include "common/server_process.hpp"

#include <csignal>
#include <cstdint>
#include <optional>
#include <string>

namespace dlock::test {

/// initdb (scram-sha-256, a superuser `postgres` with a password) into a fresh directory
/// under /tmp, then `postgres -c fsync=off` on 127.0.0.1; ready when its log says so. A
/// database `dlock` owned by a user `dlock` (password `secret`) is created for the tests.
/// As root, initdb and postgres run as the system user `dlock-pg` (created if missing).
/// The destructor stops the server (SIGINT, then SIGKILL) and removes the directory.
class postgres_server {
public:
    postgres_server();
    ~postgres_server();
    postgres_server(const postgres_server&) = delete;
    postgres_server& operator=(const postgres_server&) = delete;

    /// Fast shutdown (SIGINT), or `immediate` (SIGQUIT: no checkpoint, as a crash); SIGKILL
    /// after 10 s; reaped.
    void stop(bool immediate = false);
    void start();  ///< on the same port and data; returns when ready
    bool running() const noexcept { return proc_.running(); }
    std::uint16_t port() const noexcept { return port_; }
    /// postgresql://dlock:secret@127.0.0.1:PORT/dlock
    std::string url() const;
    postgres::config config() const;
    /// Runs `sql` as the superuser through psql (database `dlock`); returns its unaligned
    /// output (throws if psql fails).
    std::string psql(const std::string& sql) const;

private:
    std::string dir_;
    std::uint16_t port_ = 0;
    std::optional<run_as> user_;  // as root: dlock-pg
    server_process proc_{SIGINT, std::chrono::seconds(10)};
};

}  // namespace dlock::test
