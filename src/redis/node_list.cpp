// SPDX-License-Identifier: BSL-1.0
#include "redis/node_list.hpp"

#include <dlock/error.hpp>

#include <boost/asio/ip/address.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>

namespace dlock::redis {
namespace {

std::string_view trim(std::string_view s)
{
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\r'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
        s.remove_suffix(1);
    return s;
}

std::string element_name(std::size_t i, std::size_t count)
{
    return "node list: element " + std::to_string(i + 1) + " of " + std::to_string(count);
}

// A host as compared: IP addresses in canonical form ("::0:1" is "::1"), names lower-case
// without a trailing dot.
std::string host_key(const std::string& host)
{
    boost::system::error_code ec;
    auto ip = boost::asio::ip::make_address(host, ec);
    if (!ec)
        return ip.to_string();
    std::string h = host;
    if (!h.empty() && h.back() == '.')
        h.pop_back();
    std::transform(h.begin(), h.end(), h.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    return h;
}

bool same_sentinel(const sentinel_node& a, const sentinel_node& b)
{
    return a.port == b.port && host_key(a.host) == host_key(b.host);
}

}  // namespace

bool same_server(const config& a, const config& b)
{
    bool a_sentinel = !a.sentinel.master_name.empty(), b_sentinel = !b.sentinel.master_name.empty();
    if (a_sentinel || b_sentinel) {
        if (!a_sentinel || !b_sentinel || a.sentinel.master_name != b.sentinel.master_name)
            return false;
        for (const auto& x : a.sentinel.nodes)
            for (const auto& y : b.sentinel.nodes)
                if (same_sentinel(x, y))
                    return true;
        return false;
    }
    if ((a.kind == transport::unix_socket) != (b.kind == transport::unix_socket))
        return false;
    if (a.kind == transport::unix_socket)
        return std::filesystem::path(a.path).lexically_normal() == std::filesystem::path(b.path).lexically_normal();
    // tcp and tls alike: one port serves one of them, so the same host:port is one server.
    return a.port == b.port && host_key(a.host) == host_key(b.host);
}

std::string server_address(const config& c)
{
    if (!c.sentinel.master_name.empty())
        return "sentinel master '" + c.sentinel.master_name + "'";
    if (c.kind == transport::unix_socket)
        return "unix:" + c.path;
    if (c.host.find(':') != std::string::npos)
        return "[" + c.host + "]:" + std::to_string(c.port);
    return c.host + ":" + std::to_string(c.port);
}

bool check_distinct_nodes(const std::vector<config>& nodes, const std::vector<std::string>& labels, config_error& err)
{
    auto label = [&](std::size_t i) {
        return i < labels.size() && !labels[i].empty() ? labels[i] : server_address(nodes[i]);
    };
    for (std::size_t j = 1; j < nodes.size(); ++j) {
        for (std::size_t i = 0; i < j; ++i) {
            if (!same_server(nodes[i], nodes[j]))
                continue;
            // Two entries for one server would let it vote twice towards a Redlock quorum.
            err = {error::invalid_option, element_name(j, nodes.size()) + " (" + label(j) + ") is the same server, " +
                                              server_address(nodes[j]) + ", as element " + std::to_string(i + 1) +
                                              " (" + label(i) + "): list each server once"};
            return false;
        }
    }
    return true;
}

bool parse_nodes(std::string_view text, std::vector<config>& out, config_error& err)
{
    auto t = trim(text);
    if (!t.empty() && t.front() == '[') {
        boost::system::error_code ec;
        auto v = boost::json::parse(t, ec);
        if (ec) {
            err = {error::invalid_option, "node list: not a valid JSON array: " + ec.message()};
            return false;
        }
        return parse_nodes_json(v, out, err);
    }
    std::vector<std::string_view> parts;
    for (std::size_t pos = 0;;) {
        auto comma = t.find(',', pos);
        parts.push_back(trim(t.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos)));
        if (comma == std::string_view::npos)
            break;
        pos = comma + 1;
    }
    std::vector<config> result;
    std::vector<std::string> labels;
    for (std::size_t i = 0; i < parts.size(); ++i) {
        if (parts[i].empty()) {
            err = {error::invalid_url, element_name(i, parts.size()) + " is empty: expected comma-separated URLs"};
            return false;
        }
        config cfg;
        config_error e;
        labels.push_back(redact_url(parts[i]));
        if (!parse_url(parts[i], cfg, e)) {
            err = {e.code, element_name(i, parts.size()) + " (" + labels.back() + "): " + e.message};
            return false;
        }
        result.push_back(std::move(cfg));
    }
    if (!check_distinct_nodes(result, labels, err))
        return false;
    out = std::move(result);
    return true;
}

bool parse_nodes_json(const boost::json::value& v, std::vector<config>& out, config_error& err)
{
    if (!v.is_array() || v.as_array().empty()) {
        err = {error::invalid_option, "node list: expected a non-empty JSON array of URL strings or objects"};
        return false;
    }
    const auto& arr = v.as_array();
    std::vector<config> result;
    std::vector<std::string> labels;
    for (std::size_t i = 0; i < arr.size(); ++i) {
        config cfg;
        config_error e;
        bool ok = false;
        labels.emplace_back();
        if (arr[i].is_string()) {
            std::string_view url = arr[i].as_string();
            labels.back() = redact_url(url);
            ok = parse_url(url, cfg, e);
        } else if (arr[i].is_object()) {
            ok = parse_json(arr[i], cfg, e);
        } else {
            e = {error::invalid_option, "expected a URL string or an object"};
        }
        if (!ok) {
            std::string what = labels.back().empty() ? "" : " (" + labels.back() + ")";
            err = {e.code, element_name(i, arr.size()) + what + ": " + e.message};
            return false;
        }
        result.push_back(std::move(cfg));
    }
    if (!check_distinct_nodes(result, labels, err))
        return false;
    out = std::move(result);
    return true;
}

}  // namespace dlock::redis
