// SPDX-License-Identifier: BSL-1.0
// Where a Redis config points, as one line for store::describe() (never the password).
#pragma once

#include <dlock/redis/config.hpp>

#include <string>

namespace dlock::detail {

inline std::string config_address(const redis::config& c)
{
    std::string user = c.username.empty() ? std::string() : c.username + "@";
    if (!c.sentinel.master_name.empty()) {
        std::string out = "redis+sentinel://" + user;
        for (std::size_t i = 0; i < c.sentinel.nodes.size(); ++i)
            out += (i ? "," : "") + c.sentinel.nodes[i].host + ":" + std::to_string(c.sentinel.nodes[i].port);
        return out + "/" + c.sentinel.master_name + "/" + std::to_string(c.database);
    }
    if (c.kind == redis::transport::unix_socket)
        return "unix://" + c.path + "?db=" + std::to_string(c.database);
    std::string scheme = c.kind == redis::transport::tls ? "rediss://" : "redis://";
    bool v6 = c.host.find(':') != std::string::npos;
    return scheme + user + (v6 ? "[" + c.host + "]" : c.host) + ":" + std::to_string(c.port) + "/" +
           std::to_string(c.database);
}

}  // namespace dlock::detail
