#include <dlock/error.hpp>
#include <dlock/postgres/config.hpp>

#include "common/duration.hpp"

#include <charconv>

namespace dlock::postgres {

namespace {

bool fail(config_error& err, error code, std::string message)
{
    err.code = code;
    err.message = std::move(message);
    return false;
}

int hex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

bool decode(std::string_view in, std::string& out, const char* what, config_error& err)
{
    out.clear();
    for (std::size_t i = 0; i < in.size(); ++i) {
        if (in[i] != '%') {
            out += in[i];
            continue;
        }
        int hi = i + 2 < in.size() ? hex(in[i + 1]) : -1;
        int lo = i + 2 < in.size() ? hex(in[i + 2]) : -1;
        if (hi < 0 || lo < 0)
            return fail(err, error::invalid_url, std::string("postgresql URL: bad %-escape in the ") + what);
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
    }
    if (out.find('\0') != std::string::npos)
        return fail(err, error::invalid_url, std::string("postgresql URL: a NUL byte in the ") + what);
    return true;
}

bool identifier(std::string_view s)
{
    if (s.empty() || s.size() > 63 || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (char c : s)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
            return false;
    return true;
}

bool parse_option(std::string_view key, std::string_view value, config& out, config_error& err)
{
    auto duration = [&](std::chrono::milliseconds& field) {
        std::chrono::milliseconds d{};
        if (!detail::parse_duration(value, d) || d.count() < 0)
            return fail(err, error::invalid_duration,
                        "postgresql URL: option '" + std::string(key) + "': bad duration '" + std::string(value) + "'");
        field = d;
        return true;
    };
    if (key == "connect_timeout")
        return duration(out.connect_timeout);
    if (key == "timeout" || key == "request_timeout")
        return duration(out.request_timeout);
    if (key == "table") {
        if (auto why = check_table(value); !why.empty())
            return fail(err, error::invalid_option, "postgresql URL: table: " + why);
        out.table = std::string(value);
        return true;
    }
    if (key == "sslmode") {
        for (std::string_view m : {"disable", "allow", "prefer", "require", "verify-ca", "verify-full"})
            if (value == m) {
                out.sslmode = std::string(value);
                return true;
            }
        return fail(err, error::invalid_option, "postgresql URL: bad sslmode '" + std::string(value) + "'");
    }
    return fail(err, error::invalid_option,
                "postgresql URL: unknown option '" + std::string(key) +
                    "' (known: table, connect_timeout, timeout, sslmode)");
}

}  // namespace

std::string check_table(std::string_view table)
{
    auto dot = table.find('.');
    if (dot == std::string_view::npos ? identifier(table)
                                      : identifier(table.substr(0, dot)) && identifier(table.substr(dot + 1)))
        return {};
    return "'" + std::string(table) + "' is not name or schema.name (letters, digits, '_'; at most 63 each)";
}

bool parse_url(std::string_view url, config& out, config_error& err)
{
    std::string_view rest;
    for (std::string_view scheme : {"postgresql://", "postgres://"})
        if (url.substr(0, scheme.size()) == scheme)
            rest = url.substr(scheme.size());
    if (rest.data() == nullptr) {
        if (url.find("://") == std::string_view::npos)
            return fail(err, error::invalid_url,
                        "not a postgresql URL (expected postgresql://user:password@host:port/db): '" +
                            std::string(url) + "'");
        return fail(err, error::unsupported_scheme,
                    "unsupported scheme in '" + std::string(url.substr(0, url.find("://"))) +
                        "://' (expected postgresql://)");
    }
    config c = out;
    auto q = rest.find('?');
    std::string_view query = q == std::string_view::npos ? std::string_view() : rest.substr(q + 1);
    rest = rest.substr(0, q);
    if (auto at = rest.rfind('@'); at != std::string_view::npos) {
        auto userinfo = rest.substr(0, at);
        rest = rest.substr(at + 1);
        auto colon = userinfo.find(':');
        if (!decode(userinfo.substr(0, colon), c.user, "user name", err))
            return false;
        c.password.clear();
        if (colon != std::string_view::npos && !decode(userinfo.substr(colon + 1), c.password, "password", err))
            return false;
    }
    auto slash = rest.find('/');
    std::string_view hostport = rest.substr(0, slash);
    if (slash != std::string_view::npos) {
        auto db = rest.substr(slash + 1);
        if (db.find('/') != std::string_view::npos)
            return fail(err, error::invalid_url, "postgresql URL: a path of more than the database name");
        if (!db.empty() && !decode(db, c.database, "database name", err))
            return false;
    }
    std::string_view host = hostport, port;
    if (!hostport.empty() && hostport.front() == '[') {
        auto close = hostport.find(']');
        if (close == std::string_view::npos)
            return fail(err, error::invalid_url, "postgresql URL: unclosed '['");
        host = hostport.substr(1, close - 1);
        auto after = hostport.substr(close + 1);
        if (!after.empty()) {
            if (after.front() != ':')
                return fail(err, error::invalid_url, "postgresql URL: junk after ']'");
            port = after.substr(1);
            if (port.empty())
                return fail(err, error::invalid_port, "postgresql URL: empty port");
        }
    } else if (auto colon = hostport.rfind(':'); colon != std::string_view::npos) {
        host = hostport.substr(0, colon);
        port = hostport.substr(colon + 1);
        if (port.empty())
            return fail(err, error::invalid_port, "postgresql URL: empty port");
    }
    if (host.empty())
        return fail(err, error::invalid_url, "postgresql URL: no host in '" + std::string(url) + "'");
    if (!decode(host, c.host, "host", err))  // %2F: a unix socket directory
        return false;
    c.port = 5432;
    if (!port.empty()) {
        unsigned p = 0;
        auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
        if (ec != std::errc() || end != port.data() + port.size() || p == 0 || p > 65535)
            return fail(err, error::invalid_port, "postgresql URL: bad port '" + std::string(port) + "' (1..65535)");
        c.port = static_cast<std::uint16_t>(p);
    }
    while (!query.empty()) {
        auto amp = query.find('&');
        auto kv = query.substr(0, amp);
        auto eq = kv.find('=');
        if (eq == std::string_view::npos)
            return fail(err, error::invalid_option, "postgresql URL: option '" + std::string(kv) + "' has no value");
        if (!parse_option(kv.substr(0, eq), kv.substr(eq + 1), c, err))
            return false;
        query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    }
    out = std::move(c);
    return true;
}

std::string to_url(const config& cfg)
{
    std::string s = "postgresql://";
    if (!cfg.user.empty())
        s += cfg.user + "@";
    s += cfg.host.find(':') != std::string::npos ? "[" + cfg.host + "]" : cfg.host;
    s += ":" + std::to_string(cfg.port) + "/" + cfg.database;
    return s;
}

}  // namespace dlock::postgres
