// SPDX-License-Identifier: BSL-1.0
// Pieces of the store URLs: one host[:port] entry, the comma-separated list of the stores that
// list servers (etcd://, memcached://, zk://), the ?key=value options, and the scheme, user
// info, %-escapes and database of a database server's URL (postgresql://, mariadb://).
// Header-only: each backend's config parser includes it.
#pragma once

#include <dlock/error.hpp>

#include "common/duration.hpp"

#include <charconv>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::detail {

/// A parse failure: the error code and a message that starts with the URL's label.
struct url_failure {
    error code{};
    std::string message{};
};

/// Fills a store's config_error (code and message) and says false: a parser's one way out.
template <class Err>
bool fail(Err& err, error code, std::string message)
{
    err.code = code;
    err.message = std::move(message);
    return false;
}

/// Option `key`'s `value` as a duration into `field`; `label` names the URL ("etcd URL").
/// `positive`: zero is refused too (a timeout or session that must last).
template <class Err>
bool duration_option(std::string_view label, std::string_view key, std::string_view value,
                     std::chrono::milliseconds& field, Err& err, bool positive = false)
{
    std::chrono::milliseconds d{};
    if (!parse_duration(value, d) || d.count() < 0 || (positive && d.count() == 0))
        return fail(err, error::invalid_duration,
                    std::string(label) + ": option '" + std::string(key) + "': bad duration '" + std::string(value) +
                        "'");
    field = d;
    return true;
}

/// Option `key`'s `value` as a whole number in [lo, hi] into `field`; `label` names the URL.
template <class Err, class Field>
bool count_option(std::string_view label, std::string_view key, std::string_view value, unsigned lo, unsigned hi,
                  Field& field, Err& err)
{
    unsigned n = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || end != value.data() + value.size() || n < lo || n > hi)
        return fail(err, error::invalid_option,
                    std::string(label) + ": " + std::string(key) + ": '" + std::string(value) + "' is not " +
                        std::to_string(lo) + ".." + std::to_string(hi));
    field = n;
    return true;
}

/// A list of servers (each with `host` and `port`) as a URL writes them: `h:p,[v6]:p`.
template <class List>
std::string host_list(const List& servers)
{
    std::string s;
    for (const auto& srv : servers) {
        if (!s.empty())
            s += ',';
        s += srv.host.find(':') != std::string::npos ? "[" + srv.host + "]" : srv.host;
        s += ':' + std::to_string(srv.port);
    }
    return s;
}

/// A SQL identifier dlock accepts for a table: ASCII letters, digits and '_', not
/// starting with a digit, 1 to `max` characters (the server's limit less dlock's suffixes).
inline bool sql_identifier(std::string_view s, std::size_t max)
{
    if (s.empty() || s.size() > max || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (char c : s)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
            return false;
    return true;
}

/// A table name: `name` or `qualifier.name` (a database or schema), each a sql_identifier.
inline bool sql_table_name(std::string_view table, std::size_t max)
{
    auto dot = table.find('.');
    if (dot == std::string_view::npos)
        return sql_identifier(table, max);
    return sql_identifier(table.substr(0, dot), max) && sql_identifier(table.substr(dot + 1), max);
}

/// The options every SQL store's URL takes: `table` (checked by `check_table`, which says
/// why a name is refused), `connect_timeout`, `timeout`. Empty if `key` is none of them,
/// else whether its value was good.
template <class Config, class CheckTable, class Err>
std::optional<bool> sql_option(std::string_view label, std::string_view key, std::string_view value, Config& out,
                               CheckTable check_table, Err& err)
{
    if (key == "connect_timeout")
        return duration_option(label, key, value, out.connect_timeout, err);
    if (key == "timeout" || key == "request_timeout")
        return duration_option(label, key, value, out.request_timeout, err);
    if (key != "table")
        return std::nullopt;
    if (auto why = check_table(value); !why.empty())
        return fail(err, error::invalid_option, std::string(label) + ": table: " + why);
    out.table = std::string(value);
    return true;
}

/// How `host`, `host:port`, `[v6]` or `[v6]:port` splits: the first problem found, if any.
enum class host_port_split {
    ok,
    unclosed_bracket,
    junk_after_bracket,
    empty_port,
    no_host
};

/// Splits `text` into `host` (without brackets) and `port` (empty if none; its digits not checked).
inline host_port_split split_host_port(std::string_view text, std::string_view& host, std::string_view& port)
{
    host = text;
    port = {};
    if (!text.empty() && text.front() == '[') {  // [v6]:port
        auto close = text.find(']');
        if (close == std::string_view::npos)
            return host_port_split::unclosed_bracket;
        host = text.substr(1, close - 1);
        auto rest = text.substr(close + 1);
        if (!rest.empty()) {
            if (rest.front() != ':')
                return host_port_split::junk_after_bracket;
            port = rest.substr(1);
            if (port.empty())
                return host_port_split::empty_port;
        }
    } else if (auto colon = text.rfind(':'); colon != std::string_view::npos) {
        host = text.substr(0, colon);
        port = text.substr(colon + 1);
        if (port.empty())
            return host_port_split::empty_port;
    }
    return host.empty() ? host_port_split::no_host : host_port_split::ok;
}

/// `port` (1..65535; empty: `default_port`) into `out`; false if it is not such a number.
inline bool parse_port(std::string_view port, std::uint16_t default_port, std::uint16_t& out)
{
    out = default_port;
    if (port.empty())
        return true;
    unsigned p = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (ec != std::errc() || end != port.data() + port.size() || p == 0 || p > 65535)
        return false;
    out = static_cast<std::uint16_t>(p);
    return true;
}

/// Parses `host`, `host:port`, `[v6]` or `[v6]:port` (port 1..65535, else `default_port`).
inline bool parse_host_port(std::string_view text, std::uint16_t default_port, std::string_view label,
                            std::string& host_out, std::uint16_t& port_out, url_failure& f)
{
    auto fail = [&](error code, std::string what) {
        f = {code, std::string(label) + ": " + what};
        return false;
    };
    std::string_view host, port;
    switch (split_host_port(text, host, port)) {
    case host_port_split::ok: break;
    case host_port_split::unclosed_bracket:
        return fail(error::invalid_url, "unclosed '[' in '" + std::string(text) + "'");
    case host_port_split::junk_after_bracket:
        return fail(error::invalid_url, "junk after ']' in '" + std::string(text) + "'");
    case host_port_split::empty_port: return fail(error::invalid_port, "empty port in '" + std::string(text) + "'");
    case host_port_split::no_host:
        return fail(error::invalid_url, "a server without a host in '" + std::string(text) + "'");
    }
    host_out = std::string(host);
    if (!parse_port(port, default_port, port_out))
        return fail(error::invalid_port, "bad port '" + std::string(port) + "' (1..65535)");
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

/// For the stores whose URLs take no user info: true if `rest` (the URL after "scheme://",
/// its options included) has an '@' anywhere. A raw '?' in a password moves its '@' into the
/// options: checked before the split at '?', so that no piece of it is shown as a server, a
/// port or an option.
inline bool has_userinfo(std::string_view rest)
{
    return rest.find('@') != std::string_view::npos;
}

/// A server-list URL (etcd://, memcached://, zk://) after its scheme: the list, the path
/// (with its '/'; empty if none) and the query (after '?').
struct list_url {
    std::string_view servers, path, query;
};

/// Splits `rest` as a list_url; user info is refused (`what_not`: the words after "user
/// names and passwords are not supported").
inline bool split_list_url(std::string_view rest, std::string_view label, std::string_view what_not, list_url& out,
                           url_failure& f)
{
    if (has_userinfo(rest)) {
        f = {error::invalid_url,
             std::string(label) + ": user names and passwords are not supported" + std::string(what_not)};
        return false;
    }
    auto q = rest.find('?');
    out.query = q == std::string_view::npos ? std::string_view() : rest.substr(q + 1);
    rest = rest.substr(0, q);
    auto slash = rest.find('/');
    out.path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
    out.servers = rest.substr(0, slash);
    return true;
}

/// Each `host[:port]` of `list` (port `default_port` if none) appended to `out` (elements
/// with `host` and `port`); `once`: a server listed twice is refused.
template <class Server>
bool parse_server_list(std::string_view list, std::uint16_t default_port, std::string_view label, bool once,
                       std::vector<Server>& out, url_failure& f)
{
    return for_each_listed(list, label, f, [&](std::string_view entry) {
        Server s;
        if (!parse_host_port(entry, default_port, label, s.host, s.port, f))
            return false;
        for (const auto& o : out)
            if (once && o.host == s.host && o.port == s.port) {
                f = {error::invalid_url,
                     std::string(label) + ": server " + s.host + ":" + std::to_string(s.port) + " is listed twice"};
                return false;
            }
        out.push_back(std::move(s));
        return true;
    });
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

/// `url` for a message, the password of its user info shown as `***`: from the first ':' after
/// the scheme (if any) to the last '@'. Also for text that is not a URL: when in doubt, hidden.
inline std::string hide_password(std::string_view url)
{
    std::string s(url);
    auto scheme = s.find("://");
    std::size_t start = scheme == std::string::npos ? 0 : scheme + 3;
    auto at = s.rfind('@');
    if (at == std::string::npos || at < start)
        return s;
    if (auto colon = s.find(':', start); colon < at)
        s.replace(colon + 1, at - colon - 1, "***");
    return s;
}

/// `url` without its scheme, one of `schemes` (`"mariadb://"`), in `rest`. Else the failure
/// names `a_name` with its article and `usage` (no "://" at all: "not a mariadb URL (expected
/// <usage>): '<url>'") or the `expected` schemes.
inline bool strip_scheme(std::string_view url, std::initializer_list<std::string_view> schemes, std::string_view a_name,
                         std::string_view usage, std::string_view expected, std::string_view& rest, url_failure& f)
{
    for (std::string_view scheme : schemes)
        if (url.substr(0, scheme.size()) == scheme) {
            rest = url.substr(scheme.size());
            return true;
        }
    if (url.find("://") == std::string_view::npos)
        f = {error::invalid_url,
             "not " + std::string(a_name) + " URL (expected " + std::string(usage) + "): '" + hide_password(url) + "'"};
    else
        f = {error::unsupported_scheme, "unsupported scheme in '" + hide_password(url.substr(0, url.find("://"))) +
                                            "://' (expected " + std::string(expected) + ")"};
    return false;
}

inline int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/// %XX-decodes `in`, the `what` of a URL ("user name"), into `out`. A '%' without two hex
/// digits and a NUL byte (the client libraries take C strings) are errors; the message never
/// shows the text, which may be a password.
inline bool percent_decode(std::string_view in, std::string& out, std::string_view label, std::string_view what,
                           url_failure& f)
{
    out.clear();
    for (std::size_t i = 0; i < in.size(); ++i) {
        if (in[i] != '%') {
            out += in[i];
            continue;
        }
        int hi = i + 2 < in.size() ? hex_digit(in[i + 1]) : -1;
        int lo = i + 2 < in.size() ? hex_digit(in[i + 2]) : -1;
        if (hi < 0 || lo < 0) {
            f = {error::invalid_url, std::string(label) + ": bad %-escape in the " + std::string(what)};
            return false;
        }
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
    }
    if (out.find('\0') != std::string::npos) {
        f = {error::invalid_url, std::string(label) + ": a NUL byte in the " + std::string(what)};
        return false;
    }
    return true;
}

/// A database server's URL after its scheme, `[user[:password]@]host[:port][/database][?options]`,
/// split: the host[:port] and the options are left to the caller.
struct server_url {
    std::string_view host_port;  ///< as written: not split, not decoded
    std::string_view query;      ///< after the '?'
};

/// Splits `rest` (the URL after "scheme://") into `out`; an '@' in the options is refused.
/// With user info, the user name and password are decoded into `user` and `password` (no
/// ':': `password` cleared); a database name (one path segment) is decoded into `database`.
/// Fields the URL does not give are left as they are.
inline bool split_server_url(std::string_view rest, std::string_view label, std::string& user, std::string& password,
                             std::string& database, server_url& out, url_failure& f)
{
    auto q = rest.find('?');
    out.query = q == std::string_view::npos ? std::string_view() : rest.substr(q + 1);
    rest = rest.substr(0, q);
    if (auto at = rest.rfind('@'); at != std::string_view::npos) {
        auto userinfo = rest.substr(0, at);
        rest = rest.substr(at + 1);
        auto colon = userinfo.find(':');
        if (!percent_decode(userinfo.substr(0, colon), user, label, "user name", f))
            return false;
        password.clear();
        if (colon != std::string_view::npos &&
            !percent_decode(userinfo.substr(colon + 1), password, label, "password", f))
            return false;
    }
    auto slash = rest.find('/');
    out.host_port = rest.substr(0, slash);
    if (slash != std::string_view::npos) {
        auto db = rest.substr(slash + 1);
        if (db.find('/') != std::string_view::npos) {
            f = {error::invalid_url, std::string(label) + ": a path of more than the database name"};
            return false;
        }
        if (!db.empty() && !percent_decode(db, database, label, "database name", f))
            return false;
    }
    // No option takes an '@': this one ends user info that holds a raw '?', and the caller's
    // messages would show a piece of the password as a host, a port or an option.
    if (out.query.find('@') != std::string_view::npos) {
        f = {error::invalid_url,
             std::string(label) + ": an '@' after the '?' (a '?' in a user name or password must be written %3F)"};
        return false;
    }
    return true;
}

/// How a database server's URL is written (postgresql://, mariadb://).
struct server_url_form {
    std::string_view scheme{}, other_scheme{};  ///< "mariadb://", and "mysql://"
    std::string_view a_name{};                  ///< with its article: "a mariadb"
    std::string_view usage{};                   ///< the form shown in "not a ... URL (expected <usage>)"
    std::string_view expected{};                ///< the schemes a wrong one is told: "mariadb:// or mysql://"
    std::string_view label{};                   ///< what messages start with: "mariadb URL"
    std::uint16_t default_port = 0;
    bool database_required = false;
};

/// A server URL whole into a copy of `out`, which replaces `out` only if all of it parses:
/// the user, password, database, host (percent-decoded: %2F for a unix socket) and port,
/// leaving what the URL does not give; its options to `option(key, value, c, err)` (which
/// fills `err` itself).
template <class Config, class Err, class Option>
bool parse_server_url(std::string_view url, const server_url_form& form, Config& out, Option option, Err& err)
{
    Config c = out;
    std::string_view rest;
    server_url parts;
    url_failure f;
    // An option's own failure is in `err` already.
    auto failed = [&] { return f.message.empty() ? false : fail(err, f.code, std::move(f.message)); };
    if (!strip_scheme(url, {form.scheme, form.other_scheme}, form.a_name, form.usage, form.expected, rest, f) ||
        !split_server_url(rest, form.label, c.user, c.password, c.database, parts, f))
        return failed();
    if (form.database_required && c.database.empty())
        return fail(err, error::invalid_url, std::string(form.label) + ": no database name");
    std::string_view host_part, port_part;
    if (split_host_port(parts.host_port, host_part, port_part) == host_port_split::no_host)
        return fail(err, error::invalid_url, std::string(form.label) + ": no host in '" + hide_password(url) + "'");
    std::string host;
    auto each = [&](std::string_view k, std::string_view v) { return option(k, v, c, err); };
    if (!parse_host_port(parts.host_port, form.default_port, form.label, host, c.port, f) ||
        !percent_decode(host, c.host, form.label, "host", f) || !for_each_option(parts.query, form.label, f, each))
        return failed();
    out = std::move(c);
    return true;
}

/// How a server-list store writes its URL (etcd://, memcached://, zk://).
struct list_url_form {
    std::string_view scheme{}, other_scheme{};  ///< "zk://", and "zookeeper://" (empty: none)
    std::string_view a_name{};                  ///< with its article: "an etcd", "a ZooKeeper"
    std::string_view usage{};                   ///< the form shown in "not a ... URL (expected <usage>)"
    std::string_view label{};                   ///< what messages start with: "etcd URL"
    std::string_view no_userinfo_yet{};         ///< after "user names and passwords are not supported"
    std::string_view server_noun{};             ///< "member", "server": for "no member in '<url>'"
    std::uint16_t default_port = 0;
    bool once = true;  ///< a server listed twice is refused
};

/// A server-list URL whole into a copy of `out`, which replaces `out` only if all of it
/// parses: its scheme, its user info refused, its path handed to `path(c, p)` (the store's
/// own meaning; it fills `err` and says false to refuse), its servers into `c.*servers`, its
/// options to `option(key, value, c, err)` (which fills `err` itself).
template <class Config, class Err, class Server, class Path, class Option>
bool parse_list_url(std::string_view url, const list_url_form& form, Config& out, std::vector<Server> Config::*servers,
                    Path path, Option option, Err& err)
{
    Config c = out;
    std::string_view rest;
    list_url parts;
    url_failure f;
    bool schemed =
        form.other_scheme.empty()
            ? strip_scheme(url, {form.scheme}, form.a_name, form.usage, form.scheme, rest, f)
            : strip_scheme(url, {form.scheme, form.other_scheme}, form.a_name, form.usage, form.scheme, rest, f);
    if (!schemed || !split_list_url(rest, form.label, form.no_userinfo_yet, parts, f))
        return fail(err, f.code, std::move(f.message));
    if (!path(c, parts.path))
        return false;
    if (parts.servers.empty())
        return fail(err, error::invalid_url,
                    std::string(form.label) + ": no " + std::string(form.server_noun) + " in '" + std::string(url) +
                        "'");
    (c.*servers).clear();
    auto each = [&](std::string_view k, std::string_view v) { return option(k, v, c, err); };
    if (!parse_server_list(parts.servers, form.default_port, form.label, form.once, c.*servers, f) ||
        !for_each_option(parts.query, form.label, f, each))
        return f.message.empty() ? false : fail(err, f.code, std::move(f.message));
    out = std::move(c);
    return true;
}

}  // namespace dlock::detail
