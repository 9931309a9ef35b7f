// SPDX-License-Identifier: BSL-1.0
// A throwaway MariaDB server on a free loopback port, for tests.
#pragma once

#include <dlock/mariadb/config.hpp>

#include "common/server_process.hpp"

#include <csignal>
#include <cstdint>
#include <string>

namespace dlock::test {

/// mariadb-install-db into a fresh directory under /tmp, then `mariadbd --no-defaults` on
/// 127.0.0.1 (and a unix socket in the directory); ready when its error log says "ready for
/// connections". Grant tables are on: the database `dlock` and three users are created for
/// the tests, each with the password `secret`:
///   `dlock`    all privileges on dlock.*
///   `nocreate` SELECT, INSERT, UPDATE, DELETE on dlock.* (no CREATE)
///   `nopriv`   nothing
/// The destructor stops the server and removes the directory.
class mariadb_server {
public:
    mariadb_server();
    ~mariadb_server();
    mariadb_server(const mariadb_server&) = delete;
    mariadb_server& operator=(const mariadb_server&) = delete;

    /// SIGTERM (a clean shutdown; SIGKILL after 20 s), or SIGKILL at once with `kill`; reaped.
    void stop(bool kill = false);
    void start();  ///< on the same port and data; returns when ready
    bool running() const noexcept { return proc_.running(); }
    std::uint16_t port() const noexcept { return port_; }
    /// mariadb://USER:secret@127.0.0.1:PORT/dlock
    std::string url(const std::string& user = "dlock") const;
    mariadb::config config(const std::string& user = "dlock") const;
    /// Runs `sql` as root through the `mariadb` client on the unix socket; returns its
    /// tab-separated output without column names (throws if the client fails).
    std::string sql(const std::string& sql) const;

private:
    std::string dir_;
    std::uint16_t port_ = 0;
    server_process proc_{SIGTERM, std::chrono::seconds(20)};
};

}  // namespace dlock::test
