// SPDX-License-Identifier: BSL-1.0
// Lists of Redis nodes (Redlock masters, cluster seeds): parsing, and refusing a server
// listed twice. No I/O and no store: the CLI and the Redlock store share these.
#pragma once

#include <dlock/redis/config.hpp>

#include <boost/json/fwd.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace dlock::redis {

/// A JSON array (text starting with '[') of URL strings or objects as parse_json reads them,
/// or comma-separated URLs as parse_url reads them. False and `err` filled on bad input; the
/// message names the element (position and text, password hidden). Empty lists and a server
/// listed twice (see check_distinct_nodes) are errors.
bool parse_nodes(std::string_view text, std::vector<config>& out, config_error& err);

/// The same from a JSON array already parsed.
bool parse_nodes_json(const boost::json::value& v, std::vector<config>& out, config_error& err);

/// True if `a` and `b` reach the same server: the same TCP host (case-insensitive, IP
/// addresses compared by value) and port whatever the scheme and database; the same socket
/// path; or, through Sentinel, the same master name with a sentinel in common. Names are
/// not resolved: "localhost" and "127.0.0.1" differ.
bool same_server(const config& a, const config& b);

/// Where `c` points, for messages: "host:port", "[v6]:port", "unix:/path" or
/// "sentinel master 'name'"; never a password.
std::string server_address(const config& c);

/// Refuses a server listed twice with error::invalid_option, naming both elements.
/// `labels[i]` names node i in the message (a redacted URL); empty labels use server_address.
bool check_distinct_nodes(const std::vector<config>& nodes, const std::vector<std::string>& labels, config_error& err);

}  // namespace dlock::redis
