// A throwaway PostgreSQL 15 server on a free loopback port, for tests.
#pragma once

#include <dlock/postgres/config.hpp>

#include <sys/types.h>

#include <cstdint>
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
    bool running() const noexcept { return pid_ > 0; }
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
    pid_t pid_ = -1;
    uid_t uid_ = 0;
    gid_t gid_ = 0;
    bool as_other_ = false;
};

}  // namespace dlock::test
