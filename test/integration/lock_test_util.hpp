// SPDX-License-Identifier: BSL-1.0
// What the lock's integration tests share: spawning, bounded polling, the keyspace.
#pragma once

#include "common/redis_server.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <functional>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace dlock::test {

inline void spawn(asio::io_context& io, std::function<asio::awaitable<void>()> f)
{
    asio::co_spawn(io, std::move(f), [](std::exception_ptr e) {
        if (e)
            std::rethrow_exception(e);
    });
}

// Waits (bounded) until `cond` holds, checking after each short timer tick.
inline asio::awaitable<bool> eventually(std::function<bool()> cond, std::chrono::milliseconds limit = 10s)
{
    asio::steady_timer t(co_await asio::this_coro::executor);
    auto deadline = clock_type::now() + limit;
    while (!cond()) {
        if (clock_type::now() >= deadline)
            co_return false;
        t.expires_after(2ms);
        co_await t.async_wait(asio::use_awaitable);
    }
    co_return true;
}

inline std::string key_count(const redis_server& srv, const std::string& pattern)
{
    return srv.cli({"EVAL", "return #redis.call('KEYS', ARGV[1])", "0", pattern});
}

}  // namespace dlock::test
