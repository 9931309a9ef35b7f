// SPDX-License-Identifier: BSL-1.0
// Unary requests to an etcd cluster's JSON gateway over a few keep-alive HTTP/1.1
// connections; a member that fails is left for the next in the list.
#pragma once

#include <dlock/etcd/config.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/system/error_code.hpp>

#include <memory>
#include <string>

namespace dlock::etcd::detail {

struct http_reply {
    unsigned status = 0;
    std::string body;
};

class http_pool {
public:
    using handler = boost::asio::any_completion_handler<void(boost::system::error_code, http_reply)>;

    http_pool(boost::asio::any_io_executor ex, const config& cfg);
    ~http_pool();
    http_pool(const http_pool&) = delete;
    http_pool& operator=(const http_pool&) = delete;

    /// POSTs `body` to `target` on the current member. Errors: connect_failed (every member
    /// refused), connection_lost, timeout (request_timeout), closed. `timeout` 0: the config's.
    /// `urgent` (the session's keep-alive): first in line when every connection is busy.
    /// `idempotent`: sent once more on a fresh connection if a reused one turns out closed
    /// before any reply (a release is not: its second try would find nothing to delete).
    void post(std::string_view target, std::string body, handler h,
              std::chrono::milliseconds timeout = std::chrono::milliseconds(0), bool urgent = false,
              bool idempotent = true);
    /// The member requests go to now ("host:port").
    std::string current() const;
    /// The member a new connection goes to, and moves on to the next after a failure there.
    const endpoint& pick() const;
    void failed(const endpoint& ep);
    /// Fails queued and pending requests with error::closed and closes every connection.
    void close();

    struct state;

private:
    std::shared_ptr<state> st_;
};

}  // namespace dlock::etcd::detail
