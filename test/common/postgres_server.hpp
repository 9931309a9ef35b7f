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

/// Whether a postgres_server speaks TLS.
enum class postgres_tls {
    off,    ///< plain TCP, password authentication
    mutual  ///< TLS only (ssl=on, `hostssl` lines): the role `dlock` needs a client certificate and its password
};

/// The certificates of a server started with postgres_tls::mutual, made with the openssl CLI
/// in its directory (`tls/`; EC P-256 keys, mode 0600, the server's owned by the server's user).
struct postgres_tls_files {
    std::string ca;                               ///< the CA that signs the files below but `foreign_*`
    std::string other_ca;                         ///< a second CA, which signed `foreign_cert` only
    std::string server_cert, server_key;          ///< for localhost and 127.0.0.1 (subjectAltName)
    std::string other_host_cert, other_host_key;  ///< for db.invalid only
    std::string client_cert, client_key;          ///< CN=dlock: the role the tests log in as
    std::string expired_cert, expired_key;        ///< CN=dlock, valid on 1 January 2020 only
    std::string foreign_cert, foreign_key;        ///< CN=dlock, signed by `other_ca`
};

/// initdb (scram-sha-256, a superuser `postgres` with a password) into a fresh directory
/// under /tmp, then `postgres -c fsync=off` on 127.0.0.1; ready when its log says so. A
/// database `dlock` owned by a user `dlock` (password `secret`) is created for the tests.
/// As root, initdb and postgres run as the system user `dlock-pg` (created if missing).
/// The destructor stops the server (SIGINT, then SIGKILL) and removes the directory.
/// With postgres_tls::mutual: certificates are made first (postgres_tls_files), the server
/// runs with ssl=on and its CA as ssl_ca_file, and pg_hba.conf has `hostssl` lines only: the
/// superuser by password, every other role by password and a client certificate whose CN is
/// the role (`clientcert=verify-full`). url() and config() then carry sslrootcert, sslcert
/// and sslkey (no sslmode: verify-full by default).
class postgres_server {
public:
    explicit postgres_server(postgres_tls tls = postgres_tls::off);
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
    /// The certificate files (postgres_tls::mutual; empty paths otherwise).
    const postgres_tls_files& tls() const noexcept { return files_; }
    /// Restarts the server presenting `cert` and `key` (postgres_tls::mutual), e.g.
    /// tls().other_host_cert; tls().server_cert and server_key put the usual ones back.
    void serve_certificate(const std::string& cert, const std::string& key);
    /// Runs `sql` as the superuser through psql (database `dlock`); returns its unaligned
    /// output (throws if psql fails).
    std::string psql(const std::string& sql) const;

private:
    void make_certificates();
    void require_tls();  // pg_hba.conf: hostssl lines only

    std::string dir_;
    postgres_tls tls_ = postgres_tls::off;
    postgres_tls_files files_;
    std::string served_cert_, served_key_;
    std::uint16_t port_ = 0;
    std::optional<run_as> user_;  // as root: dlock-pg
    server_process proc_{SIGINT, std::chrono::seconds(10)};
};

}  // namespace dlock::test
