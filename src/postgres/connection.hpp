// SPDX-License-Identifier: BSL-1.0
// One libpq connection driven on an io_context: connect (PQconnectStart/PQconnectPoll),
// queries (PQsendQueryParams, PQflush, PQconsumeInput/PQisBusy/PQgetResult) one at a time
// from a FIFO, notifications (PQnotifies) while idle. libpq never blocks the thread: its
// socket is waited on with a stream_descriptor assigned per wait and released after
// (libpq owns and closes the fd). The request pipe (src/common/request_pipe.hpp) decides
// when to connect (the listener: kept, with jittered backoff), what to send and when a query
// times out; this class is its wire.
#pragma once

#include <dlock/postgres/config.hpp>

#include "common/sql_connection_face.hpp"
#include "postgres/sql.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/system/error_code.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::postgres::detail {

struct connection_impl;

/// A failed connect: its error and the text the store keeps for last_error_text().
struct connect_failure {
    boost::system::error_code code;
    std::string text;
};

/// What libpq's `libpq_text` of a failed connect to `cfg` means. A refused TLS handshake or
/// certificate (the server's not signed by sslrootcert's CA or not for the host, ours expired
/// or from a CA the server does not trust, none given where one is required, a certificate
/// or key file libpq cannot use) is tls_failed, permanent; anything else is
/// sql::connect_error_of's. The text starts with "postgresql <to_url>", says what was refused and ends
/// with libpq's words on one line (libpq never shows a password or a key).
connect_failure classify_connect_failure(std::string_view libpq_text, const config& cfg);

/// `setup`: a simple query (no parameters).
struct connection_settings : dlock::detail::sql_connection_settings<config> {
    /// Keeps connected by itself (reconnecting with a backoff) until close(): the listener.
    /// Otherwise connects on demand, when a request is queued.
    bool persistent = false;
    /// Each notification (channel, payload).
    std::function<void(const std::string&, const std::string&)> on_notify{};
    /// After each connect and setup.
    std::function<void()> on_up{};
    /// When a connection that was up is lost.
    std::function<void()> on_down{};
};

/// exec() runs one statement with text parameters ($1..), or (`simple`) a parameterless
/// script, and completes with its rows; a timeout counts from the send. The errors, the order
/// and the completions are the SQL connections' (common/sql_connection_host.hpp).
class connection : public dlock::detail::sql_connection_face<connection_impl> {
public:
    using exec_signature = void(boost::system::error_code, sql::result);

    connection(boost::asio::any_io_executor ex, connection_settings s);
    ~connection();

    void exec(std::string text, std::vector<std::string> params, boost::asio::any_completion_handler<exec_signature> h);
    /// Persistent connections: starts connecting (once).
    void start();
    /// The server process of the current connection (0 if none): a listener's pid names its
    /// waiters in the hand-off queue, and the server can tell whether it still exists.
    int backend_pid() const noexcept;
    /// libpq's text of the last connect failure.
    const std::string& last_connect_error() const noexcept;
    void close();
};

}  // namespace dlock::postgres::detail
