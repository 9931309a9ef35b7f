// SPDX-License-Identifier: BSL-1.0
#include <dlock/error.hpp>
#include <dlock/memcached/config.hpp>

#include "common/duration.hpp"
#include "common/url_parts.hpp"

#include <algorithm>

namespace dlock::memcached {

using detail::fail;

namespace {

bool parse_option(std::string_view key, std::string_view value, config& out, config_error& err)
{
    auto duration = [&](std::chrono::milliseconds& field) {
        return detail::duration_option("memcached URL", key, value, field, err);
    };
    if (key == "timeout" || key == "request_timeout")
        return duration(out.request_timeout);
    if (key == "connect_timeout")
        return duration(out.connect_timeout);
    if (key == "ns") {
        if (value.empty() || value.find_first_of(" \r\n") != std::string_view::npos)
            return fail(err, error::invalid_option, "memcached URL: ns must be non-empty, without spaces");
        out.ns = std::string(value);
        return true;
    }
    return fail(err, error::invalid_option,
                "memcached URL: unknown option '" + std::string(key) + "' (known: ns, timeout, connect_timeout)");
}

}  // namespace

bool parse_url(std::string_view url, config& out, config_error& err)
{
    std::string_view rest;
    detail::url_failure f;
    if (!detail::strip_scheme(url, {"memcached://"}, "a memcached", "memcached://host:port[,host:port...]",
                              "memcached://", rest, f))
        return fail(err, f.code, std::move(f.message));
    config c = out;
    detail::list_url parts;
    if (!detail::split_list_url(rest, "memcached URL", "", parts, f))
        return fail(err, f.code, std::move(f.message));
    if (!parts.path.empty() && parts.path != "/")
        return fail(err, error::invalid_url, "memcached URL: no path expected in '" + std::string(url) + "'");
    if (parts.servers.empty())
        return fail(err, error::invalid_url, "memcached URL: no server in '" + std::string(url) + "'");
    c.servers.clear();
    bool ok = detail::parse_server_list(parts.servers, 11211, "memcached URL", true, c.servers, f) &&
              detail::for_each_option(parts.query, "memcached URL", f, [&](std::string_view k, std::string_view v) {
                  return parse_option(k, v, c, err);
              });
    if (!ok)
        return f.message.empty() ? false : fail(err, f.code, std::move(f.message));
    out = std::move(c);
    return true;
}

std::string to_url(const config& cfg)
{
    auto s = "memcached://" + detail::host_list(cfg.servers);
    return s;
}

}  // namespace dlock::memcached
