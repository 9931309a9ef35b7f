// SPDX-License-Identifier: BSL-1.0
// One MariaDB Connector/C connection driven on an io_context through the library's
// non-blocking API: mysql_real_connect_start/_cont, mysql_real_query_start/_cont,
// mysql_store_result_start/_cont, mysql_next_result_start/_cont. Each _start/_cont returns
// what the library waits for (MYSQL_WAIT_READ/WRITE/TIMEOUT); the socket is waited on with a
// stream_descriptor assigned per wait and released after (the library owns the fd), then
// _cont resumes it. Requests run one at a time from a FIFO; the connection is made on demand.
// The request pipe (src/common/request_pipe.hpp) decides when to connect, what to send and
// when a query times out; this class is its wire.
#pragma once

#include <dlock/mariadb/config.hpp>

#include "common/sql_connection_face.hpp"
#include "mariadb/sql.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace dlock::mariadb::detail {

struct connection_impl;

/// `setup`: a multi-statement query.
using connection_settings = dlock::detail::sql_connection_settings<config>;

/// exec() runs one multi-statement text query and completes with its result sets; `timeout`
/// bounds it (0: cfg.request_timeout). abort() drops the connection now (shutdown of its
/// socket): a request in flight fails with connection_lost, the next one connects again. The
/// errors, the order and the completions are the SQL connections' (common/sql_connection_host.hpp).
class connection : public dlock::detail::sql_connection_face<connection_impl> {
public:
    using exec_signature = void(boost::system::error_code, sql::result);

    connection(boost::asio::any_io_executor ex, connection_settings s);
    ~connection();

    void exec(std::string text, std::chrono::milliseconds timeout,
              boost::asio::any_completion_handler<exec_signature> h);
    void abort();
    /// The library's text of the last connect failure.
    const std::string& last_connect_error() const noexcept;
    void close();
};

}  // namespace dlock::mariadb::detail
