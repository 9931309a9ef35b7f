// SPDX-License-Identifier: BSL-1.0
// One memcached server: requests pipelined over one TCP connection, replies matched in
// order. Connects on demand (no background loop: the lock's own backoff paces retries);
// the request pipe (src/common/request_pipe.hpp) decides, this class is its wire.
#pragma once

#include "memcached/protocol.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dlock::memcached::detail {

struct connection_settings {
    std::string host;
    std::uint16_t port = 11211;
    std::chrono::milliseconds connect_timeout{2000};
    std::chrono::milliseconds request_timeout{5000};
};

/// - exec(): `bytes` holds `replies` commands; completes with their replies in order.
///   Errors: connect_failed / resolve_failed / timeout (no connection could be made),
///   connection_lost (it dropped with the request on the wire: it may have run), timeout
///   (counted from exec(); the connection is reset if it was on the wire), protocol_error
///   (the server does not speak the meta protocol), closed.
/// - Completions are posted, never run inside exec().
/// - Not thread-safe; one executor.
class connection {
public:
    using exec_signature = void(boost::system::error_code, std::vector<proto::reply>);

    connection(boost::asio::any_io_executor ex, connection_settings s);
    ~connection();
    connection(const connection&) = delete;
    connection& operator=(const connection&) = delete;

    void exec(std::string bytes, std::size_t replies, boost::asio::any_completion_handler<exec_signature> h);
    void close();

    struct impl;

private:
    std::shared_ptr<impl> impl_;
};

}  // namespace dlock::memcached::detail
