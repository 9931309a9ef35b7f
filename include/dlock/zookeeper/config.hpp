// SPDX-License-Identifier: BSL-1.0
/// @file
/// Where a zookeeper_store connects: the ensemble, its chroot, the lock root, timeouts.
#pragma once

#include <dlock/export.hpp>

#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::zookeeper {

/// One ZooKeeper server (its client port).
struct server {
    std::string host = "127.0.0.1";  ///< host name or address
    std::uint16_t port = 2181;       ///< client port
};

/// Settings of a zookeeper_store (parse_url reads them from a URL).
struct config {
    /// The ensemble's servers; the client talks to one at a time and moves on when it fails.
    std::vector<server> servers{server{}};
    /// The client's chroot ("" or "/app"): every path below is under it, as for Curator's
    /// `namespace` or a connect string ending in "/app".
    std::string chroot{};
    /// The lock of name N lives at `<root>/<N>` (Curator: `new InterProcessMutex(client,
    /// "<root>/<N>")`), its contenders' nodes under it.
    std::string root = "/dlock";
    /// The session timeout asked for; the servers clamp it to [2, 20] x tickTime and the store
    /// uses what they grant. Every lock of the store is lost when the session is.
    std::chrono::milliseconds session_timeout{10'000};
    /// Bound of the first connect (and of a reconnect before the session is given up).
    std::chrono::milliseconds connect_timeout{5'000};
};

/// Why parse_url refused its input.
struct config_error {
    boost::system::error_code code;  ///< what kind of problem (a dlock::error)
    std::string message;             ///< names the part and the value (never a password)
};

/// Parses `zk://host[:port][,host[:port]...][/chroot][?root=/dlock&session_timeout=10s&connect_timeout=5s]`
/// (default port 2181; `zookeeper://` is accepted too). Returns false and fills `err` on bad input.
/// @errors In `err.code`: invalid_url, unsupported_scheme, invalid_port, invalid_option (an
/// unknown or empty option), invalid_duration.
DLOCK_API bool parse_url(std::string_view url, config& out, config_error& err);

/// `zk://host:port,host:port/chroot`, for logs.
DLOCK_API std::string to_url(const config& cfg);

/// Checks a ZooKeeper path ("/a/b"): absolute, no empty, "." or ".." component, no trailing
/// '/', no NUL or control characters. Empty message if valid.
DLOCK_API std::string check_path(std::string_view path);

}  // namespace dlock::zookeeper
