// SPDX-License-Identifier: BSL-1.0
/// @file
/// Where an etcd_store connects, and how: members, key prefix, lease, timeouts.
#pragma once

#include <dlock/export.hpp>

#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::etcd {

/// One member's client URL (the JSON gateway shares etcd's client port).
struct endpoint {
    std::string host = "127.0.0.1";  ///< host name or address
    std::uint16_t port = 2379;       ///< client port
};

/// Settings of an etcd_store (parse_url reads them from a URL).
struct config {
    /// The cluster's members; requests go to one and move to the next when it fails.
    std::vector<endpoint> endpoints{endpoint{}};
    /// Before every key: a lock `name` lives under `<prefix><name>/`, as etcd's own lock
    /// (`etcdctl lock <prefix><name>`) keeps it.
    std::string prefix{};
    /// The store's one etcd lease (every lock of the store lives as long as it). Whole
    /// seconds; 0: the first acquire's lease (rounded up to whole seconds is refused).
    std::chrono::seconds lease_ttl{0};
    /// Bound of one connect to a member.
    std::chrono::milliseconds connect_timeout{2'000};
    /// Bound of one request; the keep-alive's own is at most a third of the lease.
    std::chrono::milliseconds request_timeout{5'000};
    /// Keep-alive connections for unary requests (watches have their own).
    std::size_t max_connections = 4;
};

/// Why parse_url refused its input.
struct config_error {
    boost::system::error_code code;  ///< what kind of problem (a dlock::error)
    std::string message;             ///< names the part and the value (never a password)
};

/// Parses `etcd://host[:port][,host[:port]...][/prefix][?lease=10s&timeout=5s]` (default
/// port 2379). The path, without its leading slash, becomes config::prefix. Returns false and
/// fills `err` on bad input.
/// @errors In `err.code`: invalid_url, unsupported_scheme, invalid_port, invalid_option (an
/// unknown or empty option), invalid_duration, invalid_lease (a lease that is not whole seconds).
DLOCK_API bool parse_url(std::string_view url, config& out, config_error& err);

/// `etcd://host:port,host:port/prefix`, for logs.
DLOCK_API std::string to_url(const config& cfg);

}  // namespace dlock::etcd
