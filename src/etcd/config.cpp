// SPDX-License-Identifier: BSL-1.0
#include <dlock/error.hpp>
#include <dlock/etcd/config.hpp>

#include "common/duration.hpp"
#include "common/url_parts.hpp"

#include <charconv>

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
    if (key == "connections") {
        unsigned n = 0;
        auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
        if (ec != std::errc() || end != value.data() + value.size() || n == 0 || n > 64)
            return fail(err, error::invalid_option, "etcd URL: connections must be 1..64");
        out.max_connections = n;
        return true;
    }
    return fail(err, error::invalid_option,
                "etcd URL: unknown option '" + std::string(key) +
                    "' (known: lease, timeout, connect_timeout, connections)");
}

}  // namespace

bool parse_url(std::string_view url, config& out, config_error& err)
{
    static constexpr detail::list_url_form form{
        "etcd://", {}, "an etcd", "etcd://host:port[,host:port...]", "etcd URL", " yet", "member", 2379, false};
    config c = out;
    auto prefix = [&](std::string_view p) {
        c.prefix = p.empty() ? std::string() : std::string(p.substr(1));
        return true;
    };
    auto option = [&](std::string_view k, std::string_view v) { return parse_option(k, v, c, err); };
    if (!detail::parse_list_url(url, form, c.endpoints, prefix, option, err))
        return false;
    out = std::move(c);
    return true;
}

std::string to_url(const config& cfg)
{
    auto s = "etcd://" + detail::host_list(cfg.endpoints);
    if (!cfg.prefix.empty())
        s += '/' + cfg.prefix;
    return s;
}

}  // namespace dlock::etcd
