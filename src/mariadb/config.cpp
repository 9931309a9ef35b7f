// SPDX-License-Identifier: BSL-1.0
#include <dlock/error.hpp>
#include <dlock/mariadb/config.hpp>

#include "common/duration.hpp"
#include "common/url_parts.hpp"

namespace dlock::mariadb {

using detail::fail;

namespace {

// 58: the sequence's name adds "_fence" and MariaDB's identifiers stop at 64.
constexpr std::size_t max_identifier = 58;

bool parse_option(std::string_view key, std::string_view value, config& out, config_error& err)
{
    if (auto known = detail::sql_option("mariadb URL", key, value, out, check_table, err))
        return *known;
    if (key == "wait_connections")
        return detail::count_option("mariadb URL", key, value, 0, 64, out.wait_connections, err);
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
    static constexpr detail::server_url_form form{
        "mariadb://",  "mysql://", "a mariadb", "mariadb://user:password@host:port/db", "mariadb:// or mysql://",
        "mariadb URL", 3306,       true};
    return detail::parse_server_url(url, form, out, parse_option, err);
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
