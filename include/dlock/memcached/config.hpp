// SPDX-License-Identifier: BSL-1.0
/// @file
/// Where a memcached_store connects: servers, key namespace, timeouts.
#pragma once

#include <dlock/export.hpp>

#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::memcached {

/// One memcached server (TCP).
struct server {
    std::string host = "127.0.0.1";  ///< host name or address
    std::uint16_t port = 11211;      ///< TCP port
};

/// Settings of a memcached_store (parse_url reads them from a URL).
struct config {
    /// The servers. Each name lives on one of them, chosen by rendezvous hashing of the
    /// name: adding or removing a server moves only the names that hashed to it (and so
    /// loses their locks: an efficiency lock, see memcached_store).
    std::vector<server> servers{server{}};
    /// Before every key: `<ns>:lock:<name>`, `<ns>:fence:<name>`, `<ns>:contended:<name>`.
    std::string ns = "dlock";
    /// Bound of one TCP connect (0: none).
    std::chrono::milliseconds connect_timeout{2'000};
    /// Bound of one request, send to reply (0: none). A request that times out resets its
    /// connection (the replies behind it can no longer be matched).
    std::chrono::milliseconds request_timeout{5'000};
};

/// Why parse_url refused its input.
struct config_error {
    boost::system::error_code code;  ///< what kind of problem (a dlock::error)
    std::string message;             ///< names the part and the value (never a password)
};

/// Parses `memcached://host[:port][,host[:port]...][?ns=dlock&timeout=5s&connect_timeout=2s]`
/// (default port 11211). Returns false and fills `err` on bad input.
/// @errors In `err.code`: invalid_url, unsupported_scheme, invalid_port, invalid_option (an
/// unknown or empty option), invalid_duration.
DLOCK_API bool parse_url(std::string_view url, config& out, config_error& err);

/// `memcached://host:port,host:port`, for logs.
DLOCK_API std::string to_url(const config& cfg);

}  // namespace dlock::memcached
