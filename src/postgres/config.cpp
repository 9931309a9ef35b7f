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
    static constexpr detail::server_url_form form{
        "postgresql://",  "postgres://", "a postgresql", "postgresql://user:password@host:port/db", "postgresql://",
        "postgresql URL", 5432};
    return detail::parse_server_url(url, form, out, parse_option, err);
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
