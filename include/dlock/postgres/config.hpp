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
    /// libpq's sslmode (disable, allow, prefer, require, verify-ca, verify-full); empty: libpq's default.
    std::string sslmode{};
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

/// Parses `postgresql://user[:password]@host[:port]/db[?table=dlock_locks&connect_timeout=5s&timeout=5s&sslmode=...]`
/// (also `postgres://`; default port 5432; user, password and database percent-decoded).
/// Returns false and fills `err` on bad input.
/// @errors In `err.code`: invalid_url, unsupported_scheme, invalid_port, invalid_option (an
/// unknown option, a bad value, a bad table name), invalid_duration.
DLOCK_API bool parse_url(std::string_view url, config& out, config_error& err);

/// `postgresql://user@host:port/db` (no password), for logs.
DLOCK_API std::string to_url(const config& cfg);

/// Empty if `table` is a usable table name (`name` or `schema.name`), else why not.
DLOCK_API std::string check_table(std::string_view table);

}  // namespace dlock::postgres
