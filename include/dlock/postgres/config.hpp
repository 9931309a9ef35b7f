// SPDX-License-Identifier: BSL-1.0
/// @file
/// Where a postgres_store connects: server, credentials, database, lease table, timeouts.
#pragma once

#include <dlock/export.hpp>

#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace dlock::postgres {

/// Settings of a postgres_store (parse_url reads them from a URL).
struct config {
    /// A host name, an IP address, or a directory holding the server's unix socket (`/run/postgresql`).
    std::string host = "127.0.0.1";
    std::uint16_t port = 5432;          ///< TCP port (or the socket file's number)
    std::string user{};                 ///< the role to log in as
    std::string password{};             ///< the role's password
    std::string database = "postgres";  ///< database of the lease table
    /// The lease table (`name` or `schema.name`, letters, digits and '_'); its fencing
    /// sequence is `<table>_fence`. Both are created on first use if missing.
    std::string table = "dlock_locks";
    /// libpq's sslmode: disable, allow, prefer, require, verify-ca (the server's certificate
    /// signed by `sslrootcert`'s CA) or verify-full (that, and issued for `host`). Empty:
    /// verify-full if `sslrootcert` is set, else libpq's default (prefer: TLS if the server
    /// offers it, unverified).
    std::string sslmode{};
    /// File of the CA certificates that sign the server's certificate (empty: libpq's
    /// default, `~/.postgresql/root.crt`, read only by verify-ca and verify-full).
    std::string sslrootcert{};
    /// File of the client certificate, for servers that ask for one (pg_hba.conf `cert` or
    /// `clientcert=verify-full`); empty: libpq's default (`~/.postgresql/postgresql.crt` if it exists).
    std::string sslcert{};
    /// File of the client certificate's private key, mode 0600 (0640 if owned by root) or libpq
    /// refuses it; its path is shown in logs, never its contents. Empty: libpq's default.
    std::string sslkey{};
    /// Bound of one connect, authentication and setup included (0: none).
    std::chrono::milliseconds connect_timeout{5'000};
    /// Bound of one query, send to result (0: none). A query that times out resets its connection.
    std::chrono::milliseconds request_timeout{5'000};
};

/// Why parse_url refused its input.
struct config_error {
    boost::system::error_code code;  ///< what kind of problem (a dlock::error)
    std::string message;             ///< names the part and the value (never a password)
};

/// Parses `postgresql://user[:password]@host[:port]/db[?table=dlock_locks&connect_timeout=5s&timeout=5s]`
/// with TLS as libpq spells it:
/// `&sslmode=verify-full&sslrootcert=/path/ca.crt&sslcert=/path/client.crt&sslkey=/path/client.key` (also
/// `postgres://`; default port 5432; user, password, database and the file paths percent-decoded). sslrootcert without
/// sslmode means sslmode=verify-full (set in `out`). Returns false and fills `err` on bad input.
/// @errors In `err.code`: invalid_url, unsupported_scheme, invalid_port, invalid_option (an
/// unknown option, a bad value, a bad table name, sslcert without sslkey or the reverse,
/// certificates with sslmode=disable), invalid_duration.
DLOCK_API bool parse_url(std::string_view url, config& out, config_error& err);

/// `postgresql://user@host:port/db`, with `?sslmode=...&sslrootcert=...&sslcert=...&sslkey=...`
/// for those set (the file paths, never a password), for logs.
DLOCK_API std::string to_url(const config& cfg);

/// The sslmode libpq is given: `cfg.sslmode`, else verify-full if `cfg.sslrootcert` is set,
/// else empty (libpq's default).
DLOCK_API std::string effective_sslmode(const config& cfg);

/// Empty if `table` is a usable table name (`name` or `schema.name`), else why not.
DLOCK_API std::string check_table(std::string_view table);

}  // namespace dlock::postgres
