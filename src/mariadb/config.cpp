// SPDX-License-Identifier: BSL-1.0
#include <dlock/error.hpp>
#include <dlock/mariadb/config.hpp>

#include "common/duration.hpp"
#include "common/url_parts.hpp"

#include <charconv>

namespace dlock::mariadb {

using detail::fail;

namespace {

// 58: the sequence's name adds "_fence" and MariaDB's identifiers stop at 64.
constexpr std::size_t max_identifier = 58;

bool parse_option(std::string_view key, std::string_view value, config& out, config_error& err)
{
    if (auto known = detail::sql_option("mariadb URL", key, value, out, check_table, err))
        return *known;
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
    if (detail::sql_table_name(table, max_identifier))
        return {};
    return "'" + std::string(table) + "' is not name or database.name (letters, digits, '_'; at most 58 each)";
}

bool parse_url(std::string_view url, config& out, config_error& err)
{
    constexpr std::string_view label = "mariadb URL";
    config c = out;
    std::string_view rest;
    detail::server_url parts;
    detail::url_failure f;
    // An option's own failure is in `err` already.
    auto failed = [&] { return f.message.empty() ? false : fail(err, f.code, std::move(f.message)); };
    if (!detail::strip_scheme(url, {"mariadb://", "mysql://"}, "a mariadb", "mariadb://user:password@host:port/db",
                              "mariadb:// or mysql://", rest, f) ||
        !detail::split_server_url(rest, label, c.user, c.password, c.database, parts, f))
        return failed();
    if (c.database.empty())
        return fail(err, error::invalid_url, "mariadb URL: no database name");
    std::string host;
    if (!detail::parse_host_port(parts.host_port, 3306, label, host, c.port, f) ||
        !detail::percent_decode(host, c.host, label, "host", f) ||  // %2F: a unix socket's path
        !detail::for_each_option(parts.query, label, f,
                                 [&](std::string_view k, std::string_view v) { return parse_option(k, v, c, err); }))
        return failed();
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
