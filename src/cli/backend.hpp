// The store the dlock tool talks to: one Redis (direct or through Sentinel), Redlock over a
// list of masters, or a Redis Cluster, behind the store contract plus what the tool needs.
#pragma once

#include "cli/options.hpp"

#include <dlock/store.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>

#include <functional>
#include <memory>
#include <string>

namespace dlock::cli {

struct backend {
    std::unique_ptr<store> st;
    /// Reaches the servers once; on failure fills `detail` (what each server said).
    std::function<boost::asio::awaitable<boost::system::error_code>(std::string& detail)> connect;
    /// After a wait ran out: is the store still reachable (or was it the server, not a holder)?
    std::function<boost::asio::awaitable<bool>()> reachable;
    std::function<void()> close;
    /// The lock key of a store name, for `status --json`.
    std::function<std::string(const std::string&)> lock_key;
    /// For messages: where the servers are, never a password.
    std::string where;
};

backend make_backend(const options& o, boost::asio::any_io_executor ex);

}  // namespace dlock::cli
