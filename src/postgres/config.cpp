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
constexpr std::string_view label = "postgresql URL";

// The TLS files as libpq names them, with their fields.
struct tls_file {
    std::string_view key;
    std::string config::*field;
};
constexpr tls_file tls_files[] = {
    {"sslrootcert", &config::sslrootcert}, {"sslcert", &config::sslcert}, {"sslkey", &config::sslkey}};

bool parse_option(std::string_view key, std::string_view value, config& out, config_error& err)
{
    if (auto known = detail::sql_option(label, key, value, out, check_table, err))
        return *known;
    if (key == "sslmode") {
        for (std::string_view m : {"disable", "allow", "prefer", "require", "verify-ca", "verify-full"})
            if (value == m) {
                out.sslmode = std::string(value);
                return true;
            }
        return fail(err, error::invalid_option,
                    "postgresql URL: bad sslmode '" + std::string(value) +
                        "' (disable, allow, prefer, require, verify-ca, verify-full)");
    }
    for (const auto& file : tls_files)
        if (key == file.key) {
            detail::url_failure f;
            if (value.empty())
                return fail(err, error::invalid_option, "postgresql URL: " + std::string(key) + ": an empty path");
            if (!detail::percent_decode(value, out.*file.field, label, key, f))
                return fail(err, f.code, std::move(f.message));
            return true;
        }
    return fail(err, error::invalid_option,
                "postgresql URL: unknown option '" + std::string(key) +
                    "' (known: table, connect_timeout, timeout, sslmode, sslrootcert, sslcert, sslkey)");
}

// What the options say together: a certificate goes with its key; certificates with TLS.
bool check_tls(config& c, config_error& err)
{
    if (c.sslcert.empty() != c.sslkey.empty())
        return fail(err, error::invalid_option,
                    "postgresql URL: sslcert and sslkey go together (a client certificate and its private key)");
    if (c.sslmode == "disable" && !(c.sslrootcert.empty() && c.sslcert.empty()))
        return fail(err, error::invalid_option,
                    "postgresql URL: sslmode=disable turns TLS off, yet sslrootcert or sslcert is given");
    c.sslmode = effective_sslmode(c);
    return true;
}

// A file path as a URL option's value: what is not a plain path character is %-escaped.
std::string escape_path(std::string_view path)
{
    static constexpr char hex[] = "0123456789ABCDEF";
    std::string s;
    for (char ch : path) {
        auto c = static_cast<unsigned char>(ch);
        bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '/' ||
                     c == '.' || c == '-' || c == '_' || c == '~';
        if (plain)
            s += ch;
        else
            s += {'%', hex[c >> 4], hex[c & 15]};
    }
    return s;
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
    config c = out;
    if (!detail::parse_server_url(url, form, c, parse_option, err) || !check_tls(c, err))
        return false;
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
    char sep = '?';
    auto add = [&](std::string_view key, std::string_view value) {
        if (value.empty())
            return;
        s += sep;
        s += std::string(key) + "=" + std::string(value);
        sep = '&';
    };
    add("sslmode", effective_sslmode(cfg));
    for (const auto& file : tls_files)
        add(file.key, escape_path(cfg.*file.field));
    return s;
}

std::string effective_sslmode(const config& cfg)
{
    if (cfg.sslmode.empty() && !cfg.sslrootcert.empty())
        return "verify-full";
    return cfg.sslmode;
}

}  // namespace dlock::postgres
