// SPDX-License-Identifier: BSL-1.0
/// @file
/// Where a mariadb_store connects: server, credentials, database, lease table, wake-up pool, timeouts.
#pragma once

#include <dlock/export.hpp>

#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace dlock::mariadb {

/// Settings of a mariadb_store (parse_url reads them from a URL).
struct config {
    /// A host name, an IP address, or the path of the server's unix socket (`/run/mysqld/mysqld.sock`).
    /// Names are resolved by Asio before the client library sees them (its resolver blocks).
    std::string host = "127.0.0.1";
    std::uint16_t port = 3306;       ///< TCP port
    std::string user{};              ///< the user to log in as
    std::string password{};          ///< the user's password
    std::string database = "dlock";  ///< database of the lease table (the default database)
    /// The lease table (`name` or `database.name`, letters, digits and '_', at most 58 each);
    /// its fencing sequence is `<table>_fence`, its other tables `<table>_queue`, `_set`,
    /// `_set_queue`, `_latch`, `_latch_member` and `_bell`. Created on first use if missing.
    std::string table = "dlock_locks";
    /// Connections that wait in GET_LOCK for releases of watched mutexes, one name each (0:
    /// none; the doorbell still wakes waiters of the same user). Opened on demand.
    unsigned wait_connections = 4;
    /// Bound of one connect, authentication and setup included (0: none).
    std::chrono::milliseconds connect_timeout{5'000};
    /// Bound of one request, send to last result (0: none). A request that times out resets its connection.
    std::chrono::milliseconds request_timeout{5'000};
};

/// Why parse_url refused its input.
struct config_error {
    boost::system::error_code code;  ///< what kind of problem (a dlock::error)
    std::string message;             ///< names the part and the value (never a password)
};

/// Parses
/// `mariadb://user[:password]@host[:port]/db[?table=dlock_locks&connect_timeout=5s&timeout=5s&wait_connections=4]`
/// (also `mysql://`; default port 3306; user, password, host and database percent-decoded;
/// a host `%2Frun%2Fmysqld%2Fmysqld.sock` is a unix socket). Returns false and fills `err` on bad input.
/// @errors In `err.code`: invalid_url, unsupported_scheme, invalid_port, invalid_option (an
/// unknown option, a bad value, a bad table name), invalid_duration.
DLOCK_API bool parse_url(std::string_view url, config& out, config_error& err);

/// `mariadb://user@host:port/db` (no password), for logs.
DLOCK_API std::string to_url(const config& cfg);

/// Empty if `table` is a usable table name (`name` or `database.name`), else why not.
DLOCK_API std::string check_table(std::string_view table);

}  // namespace dlock::mariadb
