// SPDX-License-Identifier: BSL-1.0
// What the stores whose leases live by a session (etcd, ZooKeeper) keep alike: the executor
// and config, the session's life and the acquires waiting for one, the acquire/release
// order, the watch table, and the way back to the store's last_error_text(). Each store's
// impl derives from it and adds its wire.
#pragma once

#include "common/session_gate.hpp"
#include "common/session_life.hpp"
#include "common/token_order.hpp"
#include "common/watch_table.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <map>
#include <string>
#include <utility>

namespace dlock::detail {

/// `Keeper` is the store's error_text_keeper (protected: the store's impl names it).
template <class Config, class Keeper>
struct session_store_state {
    using error_code = boost::system::error_code;
    using milliseconds = std::chrono::milliseconds;
    using clock_type = std::chrono::steady_clock;
    using key_pair = std::pair<std::string, std::string>;  // (name, token)

    session_store_state(boost::asio::any_io_executor e, Config c, Keeper keep)
        : ex(std::move(e)), cfg(std::move(c)), set_text(std::move(keep)), watches(ex)
    {
    }

    boost::asio::any_io_executor ex;
    Config cfg;
    Keeper set_text;  // `set_text(text)`: the store's last_error_text(), while it exists
    bool closed = false;
    session_life life;                      // the session's events, keep-alive schedule and deadline
    session_gate gate;                      // acquires waiting for a session
    token_order order;                      // a release waits for its token's acquire
    std::map<std::string, bool> contended;  // another token of ours asked while one of ours held
    watch_table watches;
};

}  // namespace dlock::detail
