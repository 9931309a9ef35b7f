#include <dlock/error.hpp>
#include <dlock/memcached/config.hpp>

#include "common/duration.hpp"

#include <algorithm>
#include <charconv>

namespace dlock::memcached {

namespace {

bool fail(config_error& err, error code, std::string message)
{
    err.code = code;
    err.message = std::move(message);
    return false;
}

bool parse_server(std::string_view text, server& out, config_error& err)
{
    std::string_view host = text, port;
    if (!text.empty() && text.front() == '[') {  // [v6]:port
        auto close = text.find(']');
        if (close == std::string_view::npos)
            return fail(err, error::invalid_url, "memcached URL: unclosed '[' in '" + std::string(text) + "'");
        host = text.substr(1, close - 1);
        auto rest = text.substr(close + 1);
        if (!rest.empty()) {
            if (rest.front() != ':')
                return fail(err, error::invalid_url, "memcached URL: junk after ']' in '" + std::string(text) + "'");
            port = rest.substr(1);
            if (port.empty())
                return fail(err, error::invalid_port, "memcached URL: empty port in '" + std::string(text) + "'");
        }
    } else if (auto colon = text.rfind(':'); colon != std::string_view::npos) {
        host = text.substr(0, colon);
        port = text.substr(colon + 1);
        if (port.empty())
            return fail(err, error::invalid_port, "memcached URL: empty port in '" + std::string(text) + "'");
    }
    if (host.empty())
        return fail(err, error::invalid_url, "memcached URL: a server without a host in '" + std::string(text) + "'");
    out.host = std::string(host);
    out.port = 11211;
    if (!port.empty()) {
        unsigned p = 0;
        auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
        if (ec != std::errc() || end != port.data() + port.size() || p == 0 || p > 65535)
            return fail(err, error::invalid_port, "memcached URL: bad port '" + std::string(port) + "' (1..65535)");
        out.port = static_cast<std::uint16_t>(p);
    }
    return true;
}

bool parse_option(std::string_view key, std::string_view value, config& out, config_error& err)
{
    auto duration = [&](std::chrono::milliseconds& field) {
        std::chrono::milliseconds d{};
        if (!detail::parse_duration(value, d) || d.count() < 0)
            return fail(err, error::invalid_duration,
                        "memcached URL: option '" + std::string(key) + "': bad duration '" + std::string(value) + "'");
        field = d;
        return true;
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
    constexpr std::string_view scheme = "memcached://";
    if (url.substr(0, scheme.size()) != scheme) {
        if (url.find("://") == std::string_view::npos)
            return fail(err, error::invalid_url,
                        "not a memcached URL (expected memcached://host:port[,host:port...]): '" + std::string(url) +
                            "'");
        return fail(err, error::unsupported_scheme,
                    "unsupported scheme in '" + std::string(url.substr(0, url.find("://"))) +
                        "://' (expected memcached://)");
    }
    config c = out;
    auto rest = url.substr(scheme.size());
    auto q = rest.find('?');
    std::string_view query = q == std::string_view::npos ? std::string_view() : rest.substr(q + 1);
    rest = rest.substr(0, q);
    if (!rest.empty() && rest.back() == '/')
        rest.remove_suffix(1);
    if (rest.find('/') != std::string_view::npos)
        return fail(err, error::invalid_url, "memcached URL: no path expected in '" + std::string(url) + "'");
    if (rest.find('@') != std::string_view::npos)
        return fail(err, error::invalid_url, "memcached URL: user names and passwords are not supported");
    if (rest.empty())
        return fail(err, error::invalid_url, "memcached URL: no server in '" + std::string(url) + "'");
    c.servers.clear();
    while (!rest.empty()) {
        auto comma = rest.find(',');
        server s;
        if (!parse_server(rest.substr(0, comma), s, err))
            return false;
        for (const auto& o : c.servers)
            if (o.host == s.host && o.port == s.port)
                return fail(err, error::invalid_url,
                            "memcached URL: server " + s.host + ":" + std::to_string(s.port) + " is listed twice");
        c.servers.push_back(std::move(s));
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
        if (comma != std::string_view::npos && rest.empty())
            return fail(err, error::invalid_url, "memcached URL: a trailing ',' in the server list");
    }
    while (!query.empty()) {
        auto amp = query.find('&');
        auto kv = query.substr(0, amp);
        auto eq = kv.find('=');
        if (eq == std::string_view::npos)
            return fail(err, error::invalid_option, "memcached URL: option '" + std::string(kv) + "' has no value");
        if (!parse_option(kv.substr(0, eq), kv.substr(eq + 1), c, err))
            return false;
        query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    }
    out = std::move(c);
    return true;
}

std::string to_url(const config& cfg)
{
    std::string s = "memcached://";
    for (std::size_t i = 0; i < cfg.servers.size(); ++i) {
        if (i)
            s += ',';
        const auto& h = cfg.servers[i].host;
        s += h.find(':') != std::string::npos ? "[" + h + "]" : h;
        s += ':' + std::to_string(cfg.servers[i].port);
    }
    return s;
}

}  // namespace dlock::memcached
