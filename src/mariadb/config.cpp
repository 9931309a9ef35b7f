#include <dlock/error.hpp>
#include <dlock/mariadb/config.hpp>

#include "common/duration.hpp"
#include "common/url_parts.hpp"

#include <charconv>

namespace dlock::mariadb {

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
            return fail(err, error::invalid_url, std::string("mariadb URL: bad %-escape in the ") + what);
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
    }
    // The client library takes C strings.
    if (out.find('\0') != std::string::npos)
        return fail(err, error::invalid_url, std::string("mariadb URL: a NUL byte in the ") + what);
    return true;
}

// 58: the sequence's name adds "_fence" and MariaDB's identifiers stop at 64.
bool identifier(std::string_view s)
{
    if (s.empty() || s.size() > 58 || (s[0] >= '0' && s[0] <= '9'))
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
                        "mariadb URL: option '" + std::string(key) + "': bad duration '" + std::string(value) + "'");
        field = d;
        return true;
    };
    if (key == "connect_timeout")
        return duration(out.connect_timeout);
    if (key == "timeout" || key == "request_timeout")
        return duration(out.request_timeout);
    if (key == "table") {
        if (auto why = check_table(value); !why.empty())
            return fail(err, error::invalid_option, "mariadb URL: table: " + why);
        out.table = std::string(value);
        return true;
    }
    if (key == "wait_connections") {
        unsigned n = 0;
        auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
        if (ec != std::errc() || end != value.data() + value.size() || n > 64)
            return fail(err, error::invalid_option,
                        "mariadb URL: wait_connections: '" + std::string(value) + "' is not 0..64");
        out.wait_connections = n;
        return true;
    }
    return fail(err, error::invalid_option,
                "mariadb URL: unknown option '" + std::string(key) +
                    "' (known: table, connect_timeout, timeout, wait_connections)");
}

}  // namespace

std::string check_table(std::string_view table)
{
    auto dot = table.find('.');
    if (dot == std::string_view::npos ? identifier(table)
                                      : identifier(table.substr(0, dot)) && identifier(table.substr(dot + 1)))
        return {};
    return "'" + std::string(table) + "' is not name or database.name (letters, digits, '_'; at most 58 each)";
}

bool parse_url(std::string_view url, config& out, config_error& err)
{
    std::string_view rest;
    for (std::string_view scheme : {"mariadb://", "mysql://"})
        if (url.substr(0, scheme.size()) == scheme)
            rest = url.substr(scheme.size());
    if (rest.data() == nullptr) {
        if (url.find("://") == std::string_view::npos)
            return fail(err, error::invalid_url,
                        "not a mariadb URL (expected mariadb://user:password@host:port/db): '" + std::string(url) +
                            "'");
        return fail(err, error::unsupported_scheme,
                    "unsupported scheme in '" + std::string(url.substr(0, url.find("://"))) +
                        "://' (expected mariadb:// or mysql://)");
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
            return fail(err, error::invalid_url, "mariadb URL: a path of more than the database name");
        if (!db.empty() && !decode(db, c.database, "database name", err))
            return false;
    }
    if (c.database.empty())
        return fail(err, error::invalid_url, "mariadb URL: no database name");
    std::string host;
    detail::url_failure f;
    if (!detail::parse_host_port(hostport, 3306, "mariadb URL", host, c.port, f))
        return fail(err, f.code, f.message);
    if (!decode(host, c.host, "host", err))  // %2F: a unix socket's path
        return false;
    while (!query.empty()) {
        auto amp = query.find('&');
        auto kv = query.substr(0, amp);
        auto eq = kv.find('=');
        if (eq == std::string_view::npos)
            return fail(err, error::invalid_option, "mariadb URL: option '" + std::string(kv) + "' has no value");
        if (!parse_option(kv.substr(0, eq), kv.substr(eq + 1), c, err))
            return false;
        query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    }
    out = std::move(c);
    return true;
}

std::string to_url(const config& cfg)
{
    std::string s = "mariadb://";
    if (!cfg.user.empty())
        s += cfg.user + "@";
    if (!cfg.host.empty() && cfg.host.front() == '/') {
        for (char c : cfg.host)  // a unix socket, as parse_url takes it back
            s += c == '/' ? std::string("%2F") : std::string(1, c);
        return s + "/" + cfg.database;
    }
    s += cfg.host.find(':') != std::string::npos ? "[" + cfg.host + "]" : cfg.host;
    return s + ":" + std::to_string(cfg.port) + "/" + cfg.database;
}

}  // namespace dlock::mariadb
