// SPDX-License-Identifier: BSL-1.0
#include <dlock/error.hpp>
#include <dlock/postgres/config.hpp>

#include "common/duration.hpp"
#include "common/url_parts.hpp"

namespace dlock::postgres {

using detail::fail;

namespace {

// PostgreSQL's identifiers stop at 63 bytes.
constexpr std::size_t max_identifier = 63;

bool parse_option(std::string_view key, std::string_view value, config& out, config_error& err)
{
    if (auto known = detail::sql_option("postgresql URL", key, value, out, check_table, err))
        return *known;
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
    if (detail::sql_table_name(table, max_identifier))
        return {};
    return "'" + std::string(table) + "' is not name or schema.name (letters, digits, '_'; at most 63 each)";
}

bool parse_url(std::string_view url, config& out, config_error& err)
{
    constexpr std::string_view label = "postgresql URL";
    config c = out;
    std::string_view rest;
    detail::server_url parts;
    detail::url_failure f;
    // An option's own failure is in `err` already.
    auto failed = [&] { return f.message.empty() ? false : fail(err, f.code, std::move(f.message)); };
    if (!detail::strip_scheme(url, {"postgresql://", "postgres://"}, "a postgresql",
                              "postgresql://user:password@host:port/db", "postgresql://", rest, f) ||
        !detail::split_server_url(rest, label, c.user, c.password, c.database, parts, f))
        return failed();
    std::string_view host, port;
    switch (detail::split_host_port(parts.host_port, host, port)) {
    case detail::host_port_split::ok: break;
    case detail::host_port_split::unclosed_bracket:
        return fail(err, error::invalid_url, "postgresql URL: unclosed '['");
    case detail::host_port_split::junk_after_bracket:
        return fail(err, error::invalid_url, "postgresql URL: junk after ']'");
    case detail::host_port_split::empty_port: return fail(err, error::invalid_port, "postgresql URL: empty port");
    case detail::host_port_split::no_host:
        return fail(err, error::invalid_url, "postgresql URL: no host in '" + detail::hide_password(url) + "'");
    }
    if (!detail::percent_decode(host, c.host, label, "host", f))  // %2F: a unix socket directory
        return failed();
    if (!detail::parse_port(port, 5432, c.port))
        return fail(err, error::invalid_port, "postgresql URL: bad port '" + std::string(port) + "' (1..65535)");
    if (!detail::for_each_option(parts.query, label, f,
                                 [&](std::string_view k, std::string_view v) { return parse_option(k, v, c, err); }))
        return failed();
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
