// SPDX-License-Identifier: BSL-1.0
/// @file
/// Connection settings, from a URL (Boost.URL) or a JSON object (Boost.JSON).
#pragma once

#include <dlock/export.hpp>

#include <boost/json/fwd.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::redis {

/// How to reach the server.
enum class transport : std::uint8_t {
    tcp,         ///< plain TCP (`redis://`)
    tls,         ///< TLS over TCP (`rediss://`)
    unix_socket  ///< a unix-domain socket (`unix://`)
};

/// One Sentinel to ask for the master's address.
struct sentinel_node {
    std::string host;            ///< host name or address
    std::uint16_t port = 26379;  ///< the Sentinel's port
};

/// Sentinel discovery. With `master_name` set, config::host and port are ignored: each
/// connection attempt asks the sentinels (the last one that answered first, then in order)
/// for the master's address, connects there, and checks with ROLE that it is a master, so
/// a failover is followed at the next reconnect. Sentinels use the connection's transport
/// (TCP or TLS) and timeouts, and their own credentials.
struct sentinel_config {
    std::string master_name;           ///< empty: no Sentinel
    std::vector<sentinel_node> nodes;  ///< at least one when master_name is set
    std::string username;              ///< ACL user for the sentinels; empty: default user
    std::string password;              ///< for the sentinels; empty: no AUTH
};

/// Everything a connection needs. Zero for a duration means "no limit" unless said otherwise.
struct config {
    /// How to reach the server: which of host/port and path count.
    transport kind = transport::tcp;
    /// Host name or address (tcp, tls).
    std::string host = "127.0.0.1";
    /// TCP port (tcp, tls).
    std::uint16_t port = 6379;
    /// Socket path (unix_socket).
    std::string path;
    /// ACL user; empty means the default user (plain `AUTH password`).
    std::string username;
    /// Password; empty means no AUTH.
    std::string password;
    /// SELECTed database; 0 sends no SELECT.
    int database = 0;
    /// CLIENT SETNAME value; empty sends none.
    std::string client_name = "dlock";

    /// Resolve + connect + TLS + handshake, per attempt. Zero: no limit.
    std::chrono::milliseconds connect_timeout{5000};
    /// Default limit for each request, from the call until its reply. Zero: no limit.
    std::chrono::milliseconds request_timeout{5000};
    /// Reconnect backoff: first delay, doubled per failure up to the max; each
    /// wait is drawn from [d/2, d] (equal jitter).
    std::chrono::milliseconds reconnect_min{20};
    std::chrono::milliseconds reconnect_max{2000};  ///< the longest reconnect delay

    /// TLS: file of trusted CA certificates (PEM); empty uses the system's default paths.
    std::string tls_ca_file;
    /// TLS: client certificate and key (PEM) for servers that require them.
    std::string tls_cert_file;
    std::string tls_key_file;  ///< TLS: the client certificate's private key (PEM)
    /// TLS: verify the server's certificate chain (and host name unless it is an IP).
    bool tls_verify = true;
    /// Find the master through Sentinel instead of host/port.
    sentinel_config sentinel;
};

/// A parse failure: the code says what kind, `message` names the field and the value.
struct config_error {
    boost::system::error_code code;  ///< what kind of problem (a dlock::error)
    std::string message;             ///< names the field and the value (never a password)
};

/// Parses `redis://[user:password@]host[:port][/db][?options]`, `rediss://...` (TLS),
/// `unix:///path/to.sock[?db=N&...]`, or
/// `redis+sentinel://[user:password@]host[:port][,host[:port]...]/MASTER[/db][?options]` (the hosts are sentinels,
/// default port 26379; the credentials are the master's; `sentinel_username` and `sentinel_password` options are the
/// sentinels'). Options: connect_timeout, request_timeout (durations such as 500ms, 5s), client_name, db, tls_ca_file,
/// tls_cert_file, tls_key_file, tls_verify (true/false). Returns false and fills `err` on bad input; the message never
/// holds the password.
///
/// User info: passwords are often pasted unencoded, so the user info ends at the *last* '@'
/// before the query (the first '?'), and the user ends at its first ':'. A password may hold
/// '@', ':', '/' and '#' as typed (`redis://user:p@ss#word@host:6379`); a '?' or, in a
/// comma-separated list, a ',' must be percent-encoded (%3F, %2C). %XX sequences are decoded
/// in user and password; a '%' not followed by two hex digits is kept as typed.
/// @errors In `err.code`: invalid_url, unsupported_scheme, invalid_port, invalid_database,
/// invalid_option (an unknown option or a bad value), invalid_duration.
DLOCK_API bool parse_url(std::string_view url, config& out, config_error& err);

/// Reads the same fields from a JSON object: {"url": "...", "host", "port", "path",
/// "username", "password", "database", "client_name", "connect_timeout" ("5s" or ms),
/// "request_timeout", "reconnect_min", "reconnect_max", "tls": {"ca_file","cert_file",
/// "key_file","verify"}, "sentinel": {"master","nodes": ["host:port",...],"username","password"}}. "url" is applied
/// first, then the other fields override it. Unknown fields are an error. Returns false and
/// fills `err` on bad input.
/// @errors In `err.code`: those of parse_url, and invalid_option for a field of the wrong
/// type or an unknown one.
DLOCK_API bool parse_json(const boost::json::value& v, config& out, config_error& err);

/// `url` with its password (user info, `password=` and `sentinel_password=` options)
/// replaced by `***`, for messages and logs. It finds the user info as parse_url does and,
/// for text parse_url refuses, errs on the side of hiding more (e.g. a raw '?' in the password).
DLOCK_API std::string redact_url(std::string_view url);

/// Parses "250ms", "5s", "2m", "1h" or a plain number of milliseconds.
DLOCK_API bool parse_duration(std::string_view text, std::chrono::milliseconds& out);

}  // namespace dlock::redis
