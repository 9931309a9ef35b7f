// SPDX-License-Identifier: BSL-1.0
// Where a memcached_store connects: servers, key namespace, timeouts.
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
    std::string host = "127.0.0.1";
    std::uint16_t port = 11211;
};

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

struct config_error {
    boost::system::error_code code;
    std::string message;
};

/// Parses `memcached://host[:port][,host[:port]...][?ns=dlock&timeout=5s&connect_timeout=2s]`
/// (default port 11211).
DLOCK_API bool parse_url(std::string_view url, config& out, config_error& err);

/// `memcached://host:port,host:port`, for logs.
DLOCK_API std::string to_url(const config& cfg);

}  // namespace dlock::memcached
