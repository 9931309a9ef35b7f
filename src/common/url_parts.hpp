// Pieces of the store URLs that list servers (etcd://, memcached://, zk://): one host[:port]
// entry, the comma-separated list, the ?key=value options. Header-only: each backend's
// config parser includes it.
#pragma once

#include <dlock/error.hpp>

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

namespace dlock::detail {

/// A parse failure: the error code and a message that starts with the URL's label.
struct url_failure {
    error code{};
    std::string message{};
};

/// Parses `host`, `host:port`, `[v6]` or `[v6]:port` (port 1..65535, else `default_port`).
inline bool parse_host_port(std::string_view text, std::uint16_t default_port, std::string_view label,
                            std::string& host_out, std::uint16_t& port_out, url_failure& f)
{
    auto fail = [&](error code, std::string what) {
        f = {code, std::string(label) + ": " + what};
        return false;
    };
    std::string_view host = text, port;
    if (!text.empty() && text.front() == '[') {  // [v6]:port
        auto close = text.find(']');
        if (close == std::string_view::npos)
            return fail(error::invalid_url, "unclosed '[' in '" + std::string(text) + "'");
        host = text.substr(1, close - 1);
        auto rest = text.substr(close + 1);
        if (!rest.empty()) {
            if (rest.front() != ':')
                return fail(error::invalid_url, "junk after ']' in '" + std::string(text) + "'");
            port = rest.substr(1);
            if (port.empty())
                return fail(error::invalid_port, "empty port in '" + std::string(text) + "'");
        }
    } else if (auto colon = text.rfind(':'); colon != std::string_view::npos) {
        host = text.substr(0, colon);
        port = text.substr(colon + 1);
        if (port.empty())
            return fail(error::invalid_port, "empty port in '" + std::string(text) + "'");
    }
    if (host.empty())
        return fail(error::invalid_url, "a server without a host in '" + std::string(text) + "'");
    host_out = std::string(host);
    port_out = default_port;
    if (!port.empty()) {
        unsigned p = 0;
        auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
        if (ec != std::errc() || end != port.data() + port.size() || p == 0 || p > 65535)
            return fail(error::invalid_port, "bad port '" + std::string(port) + "' (1..65535)");
        port_out = static_cast<std::uint16_t>(p);
    }
    return true;
}

/// Calls `each(entry)` for every comma-separated entry of `list`; a trailing ',' is an error.
template <class Each>
bool for_each_listed(std::string_view list, std::string_view label, url_failure& f, Each each)
{
    while (!list.empty()) {
        auto comma = list.find(',');
        if (!each(list.substr(0, comma)))
            return false;
        list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
        if (comma != std::string_view::npos && list.empty()) {
            f = {error::invalid_url, std::string(label) + ": a trailing ',' in the server list"};
            return false;
        }
    }
    return true;
}

/// Calls `option(key, value)` for every `key=value` of a query string.
template <class Option>
bool for_each_option(std::string_view query, std::string_view label, url_failure& f, Option option)
{
    while (!query.empty()) {
        auto amp = query.find('&');
        auto kv = query.substr(0, amp);
        auto eq = kv.find('=');
        if (eq == std::string_view::npos) {
            f = {error::invalid_option, std::string(label) + ": option '" + std::string(kv) + "' has no value"};
            return false;
        }
        if (!option(kv.substr(0, eq), kv.substr(eq + 1)))
            return false;
        query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    }
    return true;
}

}  // namespace dlock::detail
