// SPDX-License-Identifier: BSL-1.0
#include <dlock/error.hpp>
#include <dlock/redis/config.hpp>

#include "common/duration.hpp"
#include "common/url_parts.hpp"

#include <boost/json.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>

#include <charconv>
#include <limits>

namespace dlock::redis {
namespace {

bool fail(config_error& err, error code, std::string message)
{
    err.code = code;
    err.message = std::move(message);
    return false;
}

template <class Int>
bool parse_int(std::string_view s, Int& out)
{
    if (s.empty())
        return false;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size();
}

bool parse_bool(std::string_view s, bool& out)
{
    if (s == "true" || s == "1" || s == "yes")
        return out = true, true;
    if (s == "false" || s == "0" || s == "no")
        return out = false, true;
    return false;
}

bool parse_port(std::string_view s, config& out, config_error& err)
{
    unsigned long v = 0;
    if (!parse_int(s, v) || v == 0 || v > 65535)
        return fail(err, error::invalid_port, "port '" + std::string(s) + "': expected a number from 1 to 65535");
    out.port = static_cast<std::uint16_t>(v);
    return true;
}

bool parse_db(std::string_view s, config& out, config_error& err)
{
    int v = 0;
    if (!parse_int(s, v) || v < 0)
        return fail(err, error::invalid_database, "database '" + std::string(s) + "': expected a non-negative integer");
    out.database = v;
    return true;
}

// Where the user info of `url` ends: the last '@' between the authority's start and the
// first '?' (npos if none). Passwords are pasted raw, so '@', ':', '/' and '#' may appear in
// them; only '?' (the query, where values may hold '@' too) must be written %3F.
std::size_t userinfo_end(std::string_view url, std::size_t authority)
{
    if (authority >= url.size() || url[authority] == '/')
        return std::string_view::npos;  // no authority: "unix:///path", where '@' may be in the path
    std::string_view head = url.substr(0, url.find('?', authority));
    auto at = head.rfind('@');
    return at == std::string_view::npos || at < authority ? std::string_view::npos : at;
}

// %XX decoded; a '%' not followed by two hex digits is kept as typed (a raw password).
std::string percent_decode(std::string_view s)
{
    using dlock::detail::hex_digit;
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size() && hex_digit(s[i + 1]) >= 0 && hex_digit(s[i + 2]) >= 0) {
            out += static_cast<char>(hex_digit(s[i + 1]) * 16 + hex_digit(s[i + 2]));
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}

// "user:password" (either may be empty; no ':' means a user alone), decoded.
void apply_userinfo(std::string_view userinfo, config& c)
{
    auto colon = userinfo.find(':');
    c.username = percent_decode(userinfo.substr(0, colon));
    c.password = colon == std::string_view::npos ? std::string() : percent_decode(userinfo.substr(colon + 1));
}

// One option by name, shared by URL query parameters and JSON string values.
bool apply_option(std::string_view key, std::string_view value, config& out, config_error& err)
{
    auto duration = [&](std::chrono::milliseconds& field) {
        if (!parse_duration(value, field))
            return fail(err, error::invalid_duration,
                        "option '" + std::string(key) + "' = '" + std::string(value) +
                            "': expected a duration such as 500ms, 5s or 2m");
        return true;
    };
    if (key == "connect_timeout")
        return duration(out.connect_timeout);
    if (key == "request_timeout")
        return duration(out.request_timeout);
    if (key == "reconnect_min")
        return duration(out.reconnect_min);
    if (key == "reconnect_max")
        return duration(out.reconnect_max);
    if (key == "client_name")
        return out.client_name = value, true;
    if (key == "sentinel_username")
        return out.sentinel.username = value, true;
    if (key == "sentinel_password")
        return out.sentinel.password = value, true;
    if (key == "db" || key == "database")
        return parse_db(value, out, err);
    if (key == "tls_ca_file")
        return out.tls_ca_file = value, true;
    if (key == "tls_cert_file")
        return out.tls_cert_file = value, true;
    if (key == "tls_key_file")
        return out.tls_key_file = value, true;
    if (key == "tls_verify") {
        if (!parse_bool(value, out.tls_verify))
            return fail(err, error::invalid_option,
                        "option 'tls_verify' = '" + std::string(value) + "': expected true or false");
        return true;
    }
    return fail(err, error::invalid_option, "unknown option '" + std::string(key) + "'");
}

}  // namespace

bool parse_duration(std::string_view text, std::chrono::milliseconds& out)
{
    return detail::parse_duration(text, out);
}

std::string redact_url(std::string_view url)
{
    std::string s(url);
    // The user info is found as parse_url finds it. Without "scheme://" (a typo such as
    // "redis:/u:pw@h") the text before the '@' may still hold a password: hide from its first ':'.
    auto scheme_end = s.find("://");
    std::size_t start = scheme_end == std::string::npos ? 0 : scheme_end + 3;
    auto at = userinfo_end(s, start);
    // A raw '?' in the password moves its last '@' behind the query (and leaves any '@' before
    // the '?' inside the password): then hide up to the last '@'.
    auto query = s.find('?', start);
    if (auto last = s.rfind('@'); last != std::string::npos && last >= start &&
                                  (at == std::string::npos || (query != std::string::npos && last > query)))
        at = last;
    if (at != std::string::npos) {
        auto colon = s.find(':', start);
        if (colon < at)
            s.replace(colon + 1, at - colon - 1, "***");
    }
    for (std::string_view key : {"password=", "sentinel_password="}) {
        for (auto p = s.find(key); p != std::string::npos; p = s.find(key, p + key.size())) {
            if (p == 0 || (s[p - 1] != '?' && s[p - 1] != '&'))
                continue;
            auto v = p + key.size();
            // Up to the next parameter only: a '#' may be part of a raw password.
            s.replace(v, std::min(s.find('&', v), s.size()) - v, "***");
        }
    }
    return s;
}

// "host[:port]" or "[v6]:port" of one sentinel.
static bool parse_sentinel_node(std::string_view text, std::string_view url, sentinel_node& out, config_error& err)
{
    std::string_view host = text, port;
    if (!text.empty() && text.front() == '[') {
        auto close = text.find(']');
        if (close == std::string_view::npos)
            return fail(err, error::invalid_url,
                        "URL '" + redact_url(url) + "': unclosed '[' in sentinel '" + std::string(text) + "'");
        host = text.substr(1, close - 1);
        if (close + 1 < text.size()) {
            if (text[close + 1] != ':')
                return fail(err, error::invalid_url,
                            "URL '" + redact_url(url) + "': bad sentinel '" + std::string(text) + "'");
            port = text.substr(close + 2);
        }
    } else if (auto colon = text.find(':'); colon != std::string_view::npos) {
        host = text.substr(0, colon);
        port = text.substr(colon + 1);
    }
    if (host.empty())
        return fail(err, error::invalid_url,
                    "URL '" + redact_url(url) + "': empty sentinel host in '" + std::string(text) + "'");
    out.host = std::string(host);
    if (!port.empty()) {
        config tmp;
        if (!parse_port(port, tmp, err))
            return false;
        out.port = tmp.port;
    }
    return true;
}

// redis+sentinel://[user:pw@]h1[:p1][,h2[:p2]...]/MASTER[/db][?options]: Boost.URL cannot
// read a host list, so split it here and hand the rest to the redis:// parser.
static bool parse_url_parts(std::string_view text, config& out, config_error& err);

static bool parse_sentinel_url(std::string_view text, config& out, config_error& err)
{
    constexpr std::string_view scheme = "redis+sentinel://";
    std::string_view rest = text.substr(scheme.size());
    auto at = userinfo_end(rest, 0);
    std::string_view after = at == std::string_view::npos ? rest : rest.substr(at + 1);
    auto auth_end = after.find_first_of("/?#");
    std::string_view hosts = after.substr(0, auth_end);
    std::string_view tail = auth_end == std::string_view::npos ? std::string_view() : after.substr(auth_end);
    std::vector<sentinel_node> nodes;
    while (!hosts.empty()) {
        auto comma = hosts.find(',');
        sentinel_node n;
        if (!parse_sentinel_node(hosts.substr(0, comma), text, n, err))
            return false;
        nodes.push_back(std::move(n));
        hosts = comma == std::string_view::npos ? std::string_view() : hosts.substr(comma + 1);
    }
    if (nodes.empty())
        return fail(err, error::invalid_url, "URL '" + redact_url(text) + "': missing sentinel hosts");
    std::string_view path = tail.substr(0, tail.find_first_of("?#"));
    std::string_view query = tail.substr(path.size());
    if (path.size() < 2)
        return fail(err, error::invalid_url,
                    "URL '" + redact_url(text) + "': missing master name (redis+sentinel://host:26379/mymaster)");
    path.remove_prefix(1);
    std::string_view master = path.substr(0, path.find('/'));
    std::string_view db = master.size() < path.size() ? path.substr(master.size()) : std::string_view();
    if (master.empty())
        return fail(err, error::invalid_url,
                    "URL '" + redact_url(text) + "': missing master name (redis+sentinel://host:26379/mymaster)");
    // The master's own address comes from the sentinels; "sentinel" is a placeholder host.
    std::string rebuilt = "redis://sentinel" + std::string(db) + std::string(query);
    config c = out;
    if (!parse_url_parts(rebuilt, c, err))
        return false;
    if (at != std::string_view::npos)
        apply_userinfo(rest.substr(0, at), c);
    c.sentinel.master_name = std::string(master);
    c.sentinel.nodes = std::move(nodes);
    out = std::move(c);
    return true;
}

// The user info is split off here, not by Boost.URL: a raw password may hold '@', '#' or '/',
// which RFC 3986 allows only percent-encoded (see userinfo_end). false if there is none.
static bool split_userinfo(std::string_view text, std::string_view& userinfo, std::string& stripped)
{
    auto sep = text.find("://");
    if (sep == std::string_view::npos)
        return false;
    auto at = userinfo_end(text, sep + 3);
    if (at == std::string_view::npos)
        return false;
    userinfo = text.substr(sep + 3, at - sep - 3);
    stripped = std::string(text.substr(0, sep + 3)) + std::string(text.substr(at + 1));
    return true;
}

// Host, port and database of a redis:// or rediss:// URL.
static bool parse_tcp_address(const boost::urls::url_view& u, std::string_view text, config& c, config_error& err)
{
    if (!u.has_authority() || u.host().empty())
        return fail(err, error::invalid_url, "URL '" + redact_url(text) + "': missing host");
    c.host = u.host_address();  // IPv6 comes without its brackets
    std::string path = u.path();
    // Boost.URL 1.81 reads "h:12ab/3" as port "12" and path "ab/3": reject, naming the port.
    if (!path.empty() && path.front() != '/') {
        if (u.has_port())
            return fail(err, error::invalid_port,
                        "port '" + std::string(u.port()) + path.substr(0, path.find('/')) +
                            "': expected a number from 1 to 65535");
        return fail(err, error::invalid_url, "URL '" + redact_url(text) + "': expected '/' after the host");
    }
    if (u.has_port()) {
        if (!parse_port(u.port(), c, err))
            return false;
    } else {
        c.port = 6379;
    }
    if (!path.empty() && path != "/") {
        if (!parse_db(std::string_view(path).substr(1), c, err))
            return false;
    }
    return true;
}

// The transport the scheme names, and its address.
static bool parse_transport(const boost::urls::url_view& u, std::string_view text, config& c, config_error& err)
{
    std::string scheme = u.scheme();
    if (scheme == "redis" || scheme == "rediss") {
        c.kind = scheme == "redis" ? transport::tcp : transport::tls;
        return parse_tcp_address(u, text, c, err);
    }
    if (scheme == "unix") {
        c.kind = transport::unix_socket;
        c.path = u.path();
        if (c.path.empty())
            return fail(err, error::invalid_url, "URL '" + redact_url(text) + "': missing socket path");
        return true;
    }
    return fail(err, error::unsupported_scheme,
                "URL scheme '" + scheme + "': use redis://, rediss://, unix:// or redis+sentinel://");
}

static bool parse_url_parts(std::string_view text, config& out, config_error& err)
{
    if (text.rfind("redis+sentinel://", 0) == 0)
        return parse_sentinel_url(text, out, err);
    std::string_view userinfo;
    std::string stripped;
    bool has_userinfo = split_userinfo(text, userinfo, stripped);
    auto parsed = boost::urls::parse_uri(has_userinfo ? std::string_view(stripped) : text);
    if (!parsed)
        return fail(err, error::invalid_url, "URL '" + redact_url(text) + "': " + parsed.error().message());
    boost::urls::url_view u = *parsed;
    config c = out;
    if (!parse_transport(u, text, c, err))
        return false;
    // redis://:secret@host means "password only", as redis-cli reads it.
    if (has_userinfo)
        apply_userinfo(userinfo, c);
    for (auto param : u.params()) {
        if (!apply_option(param.key, param.has_value ? std::string_view(param.value) : std::string_view(), c, err))
            return false;
    }
    out = std::move(c);
    return true;
}

bool parse_url(std::string_view text, config& out, config_error& err)
{
    if (parse_url_parts(text, out, err))
        return true;
    // An '@' after the first '?' may end a password holding a raw '?': then the parts named
    // in the message (port, database, option) could be pieces of it. Name none of them.
    auto query = text.find('?');
    if (query != std::string_view::npos && text.find('@', query) != std::string_view::npos)
        err.message =
            "URL '" + redact_url(text) + "': " + err.code.message() + " (a '?' in a password must be written %3F)";
    return false;
}

// A JSON string into `field`; `key` names the field in the message.
static bool json_string(const boost::json::value& val, std::string_view key, std::string& field, config_error& err)
{
    if (!val.is_string())
        return fail(err, error::invalid_option, "field '" + std::string(key) + "': expected a string");
    field = val.get_string();
    return true;
}

// Milliseconds as a JSON number, or a duration string such as "5s".
static bool json_duration(const boost::json::value& val, std::string_view key, std::chrono::milliseconds& field,
                          config_error& err)
{
    if (val.is_int64() && val.get_int64() >= 0)
        return field = std::chrono::milliseconds(val.get_int64()), true;
    if (val.is_uint64())
        return field = std::chrono::milliseconds(val.get_uint64()), true;
    if (val.is_string() && parse_duration(val.get_string(), field))
        return true;
    return fail(err, error::invalid_duration,
                "field '" + std::string(key) + "': expected milliseconds or a duration string such as \"5s\"");
}

// "sentinel.nodes": an array of "host:port" strings, replacing any the URL gave.
static bool json_sentinel_nodes(const boost::json::value& val, config& c, config_error& err)
{
    const auto* arr = val.if_array();
    if (!arr)
        return fail(err, error::invalid_option, "field 'sentinel.nodes': expected an array of \"host:port\"");
    c.sentinel.nodes.clear();
    for (const auto& e : *arr) {
        if (!e.is_string())
            return fail(err, error::invalid_option, "field 'sentinel.nodes': expected strings \"host:port\"");
        sentinel_node node;
        if (!parse_sentinel_node(e.get_string(), "sentinel.nodes", node, err))
            return false;
        c.sentinel.nodes.push_back(std::move(node));
    }
    return true;
}

// The "sentinel" object: the master's name, the sentinels and their own credentials.
static bool json_sentinel(const boost::json::value& val, config& c, config_error& err)
{
    const auto* t = val.if_object();
    if (!t)
        return fail(err, error::invalid_option, "field 'sentinel': expected an object");
    for (const auto& [sk, sv] : *t) {
        std::string_view n = sk;
        bool ok = true;
        if (n == "master")
            ok = json_string(sv, "sentinel.master", c.sentinel.master_name, err);
        else if (n == "username")
            ok = json_string(sv, "sentinel.username", c.sentinel.username, err);
        else if (n == "password")
            ok = json_string(sv, "sentinel.password", c.sentinel.password, err);
        else if (n == "nodes")
            ok = json_sentinel_nodes(sv, c, err);
        else
            return fail(err, error::invalid_option, "unknown field 'sentinel." + std::string(n) + "'");
        if (!ok)
            return false;
    }
    if (c.sentinel.master_name.empty() || c.sentinel.nodes.empty())
        return fail(err, error::invalid_option, "field 'sentinel': needs \"master\" and at least one of \"nodes\"");
    return true;
}

// The "tls" object: its presence alone selects TLS.
static bool json_tls(const boost::json::value& val, config& c, config_error& err)
{
    const auto* t = val.if_object();
    if (!t)
        return fail(err, error::invalid_option, "field 'tls': expected an object");
    c.kind = transport::tls;
    for (const auto& [tk, tv] : *t) {
        std::string_view n = tk;
        bool ok = true;
        if (n == "ca_file")
            ok = json_string(tv, "tls.ca_file", c.tls_ca_file, err);
        else if (n == "cert_file")
            ok = json_string(tv, "tls.cert_file", c.tls_cert_file, err);
        else if (n == "key_file")
            ok = json_string(tv, "tls.key_file", c.tls_key_file, err);
        else if (n == "verify") {
            if (!tv.is_bool())
                return fail(err, error::invalid_option, "field 'tls.verify': expected true or false");
            c.tls_verify = tv.get_bool();
        } else
            return fail(err, error::invalid_option, "unknown field 'tls." + std::string(n) + "'");
        if (!ok)
            return false;
    }
    return true;
}

// One top-level field other than "url" (which parse_json reads before all others).
static bool json_field(std::string_view k, const boost::json::value& val, config& c, config_error& err)
{
    if (k == "host") {
        if (!json_string(val, k, c.host, err))
            return false;
        if (c.kind == transport::unix_socket)
            c.kind = transport::tcp;
        return true;
    }
    if (k == "port") {
        if (!val.is_int64() || val.get_int64() < 1 || val.get_int64() > 65535)
            return fail(err, error::invalid_port, "field 'port': expected an integer from 1 to 65535");
        c.port = static_cast<std::uint16_t>(val.get_int64());
        return true;
    }
    if (k == "path") {
        bool ok = json_string(val, k, c.path, err);
        c.kind = transport::unix_socket;
        return ok;
    }
    if (k == "username")
        return json_string(val, k, c.username, err);
    if (k == "password")
        return json_string(val, k, c.password, err);
    if (k == "client_name")
        return json_string(val, k, c.client_name, err);
    if (k == "database" || k == "db") {
        if (!val.is_int64() || val.get_int64() < 0 || val.get_int64() > std::numeric_limits<int>::max())
            return fail(err, error::invalid_database,
                        "field '" + std::string(k) + "': expected a non-negative integer");
        c.database = static_cast<int>(val.get_int64());
        return true;
    }
    if (k == "connect_timeout")
        return json_duration(val, k, c.connect_timeout, err);
    if (k == "request_timeout")
        return json_duration(val, k, c.request_timeout, err);
    if (k == "reconnect_min")
        return json_duration(val, k, c.reconnect_min, err);
    if (k == "reconnect_max")
        return json_duration(val, k, c.reconnect_max, err);
    if (k == "sentinel")
        return json_sentinel(val, c, err);
    if (k == "tls")
        return json_tls(val, c, err);
    return fail(err, error::invalid_option, "unknown field '" + std::string(k) + "'");
}

bool parse_json(const boost::json::value& v, config& out, config_error& err)
{
    const auto* obj = v.if_object();
    if (!obj)
        return fail(err, error::invalid_option, "connection config: expected a JSON object");
    config c = out;
    if (const auto* url = obj->if_contains("url")) {
        if (!url->is_string())
            return fail(err, error::invalid_option, "field 'url': expected a string");
        if (!parse_url(url->get_string(), c, err))
            return false;
    }
    for (const auto& [key, val] : *obj) {
        std::string_view k = key;
        if (k != "url" && !json_field(k, val, c, err))
            return false;
    }
    out = std::move(c);
    return true;
}

}  // namespace dlock::redis
