// SPDX-License-Identifier: BSL-1.0
// One etcd watch on its own HTTP connection (the gateway streams a watch as chunked JSON
// lines): deletions of one key or one range, from a given revision.
#pragma once

#include <dlock/etcd/config.hpp>

#include "etcd/codec.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/system/error_code.hpp>

#include <functional>
#include <memory>
#include <string>

namespace dlock::etcd::detail {

class watch_stream {
public:
    /// Each message as it comes; then once an error (the stream ended: the connection
    /// failed, the member refused, or the message could not be read). Never after cancel().
    using callback = std::function<void(boost::system::error_code, const watch_message&)>;

    /// Connects to `ep` and creates the watch `create_body` (watch_create_request()).
    static std::shared_ptr<watch_stream> start(boost::asio::any_io_executor ex, const config& cfg, const endpoint& ep,
                                               std::string create_body, callback cb);
    ~watch_stream();
    /// Closes the connection; no callback runs after this returns.
    void cancel();

    struct state;

private:
    explicit watch_stream(std::shared_ptr<state> st) : st_(std::move(st)) {}
    std::shared_ptr<state> st_;
};

}  // namespace dlock::etcd::detail
