// SPDX-License-Identifier: BSL-1.0
// Where a postgres_store connects: server, credentials, database, lease table, timeouts.
#pragma once

#include <dlock/export.hpp>

#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace dlock::postgres {

struct config {
    /// A host name, an IP address, or a directory holding the server's unix socket (`/run/postgresql`).
    std::string host = "127.0.0.1";
    std::uint16_t port = 5432;
    std::string user{};
    std::string password{};
    std::string database = "postgres";
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

struct config_error {
    boost::system::error_code code;
    std::string message;
};

/// Parses `postgresql://user[:password]@host[:port]/db[?table=dlock_locks&connect_timeout=5s&timeout=5s&sslmode=...]`
/// (also `postgres://`; default port 5432; user, password and database percent-decoded).
DLOCK_API bool parse_url(std::string_view url, config& out, config_error& err);

/// `postgresql://user@host:port/db` (no password), for logs.
DLOCK_API std::string to_url(const config& cfg);

/// Empty if `table` is a usable table name (`name` or `schema.name`), else why not.
DLOCK_API std::string check_table(std::string_view table);

}  // namespace dlock::postgres
