// SPDX-License-Identifier: BSL-1.0
#include <dlock/error.hpp>
#include <dlock/etcd/config.hpp>

#include "common/duration.hpp"
#include "common/url_parts.hpp"

namespace dlock::etcd {

using detail::fail;

namespace {

bool parse_option(std::string_view key, std::string_view value, config& out, config_error& err)
{
    auto duration = [&](std::chrono::milliseconds& field) {
        return detail::duration_option("etcd URL", key, value, field, err, true);
    };
    if (key == "lease") {
        std::chrono::milliseconds l{};
        if (!duration(l))
            return false;
        if (l.count() % 1000 != 0)
            return fail(err, error::invalid_lease,
                        "etcd URL: lease must be whole seconds (got " + std::string(value) + ")");
        out.lease_ttl = std::chrono::duration_cast<std::chrono::seconds>(l);
        return true;
    }
    if (key == "timeout")
        return duration(out.request_timeout);
    if (key == "connect_timeout")
        return duration(out.connect_timeout);
    if (key == "connections")
        return detail::count_option("etcd URL", key, value, 1, 64, out.max_connections, err);
    return fail(err, error::invalid_option,
                "etcd URL: unknown option '" + std::string(key) +
                    "' (known: lease, timeout, connect_timeout, connections)");
}

}  // namespace

bool parse_url(std::string_view url, config& out, config_error& err)
{
    static constexpr detail::list_url_form form{
        "etcd://", {}, "an etcd", "etcd://host:port[,host:port...]", "etcd URL", " yet", "member", 2379, false};
    auto prefix = [](config& c, std::string_view p) {
        c.prefix = p.empty() ? std::string() : std::string(p.substr(1));
        return true;
    };
    return detail::parse_list_url(url, form, out, &config::endpoints, prefix, parse_option, err);
}

std::string to_url(const config& cfg)
{
    auto s = "etcd://" + detail::host_list(cfg.endpoints);
    if (!cfg.prefix.empty())
        s += '/' + cfg.prefix;
    return s;
}

}  // namespace dlock::etcd
