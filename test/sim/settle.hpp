// SPDX-License-Identifier: BSL-1.0
// For the differential tests: waits (up to 5 s, a look every 10 ms) until `done()` holds,
// as a watch's `ready` or a grant notice arrives from the server on its own connection.
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <functional>

namespace dlock::sim {

inline boost::asio::awaitable<void> settle(std::function<bool()> done)
{
    boost::asio::steady_timer t(co_await boost::asio::this_coro::executor);
    for (int i = 0; i < 500 && !done(); ++i) {
        t.expires_after(std::chrono::milliseconds(10));
        co_await t.async_wait(boost::asio::use_awaitable);
    }
}

}  // namespace dlock::sim
