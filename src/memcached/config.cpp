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
    static constexpr detail::list_url_form form{
        "memcached://",  {}, "a memcached", "memcached://host:port[,host:port...]",
        "memcached URL", "", "server",      11211};
    auto no_path = [&](config&, std::string_view p) {
        return p.empty() || p == "/" ||
               fail(err, error::invalid_url, "memcached URL: no path expected in '" + std::string(url) + "'");
    };
    return detail::parse_list_url(url, form, out, &config::servers, no_path, parse_option, err);
}

std::string to_url(const config& cfg)
{
    auto s = "memcached://" + detail::host_list(cfg.servers);
    return s;
}

}  // namespace dlock::memcached
