// SPDX-License-Identifier: BSL-1.0
// Helpers for integration tests: run a test coroutine under a time cap, wait for events
// without sleeping, and issue requests that report errors as values.
#pragma once

#include <dlock/error.hpp>
#include <dlock/guard.hpp>
#include <dlock/redis/connection.hpp>

#include "unit/print.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <exception>
#include <string>
#include <tuple>

namespace dlock::test {

namespace asio = boost::asio;
using namespace std::chrono_literals;

/// Runs `fn()` (a coroutine) on `io` for at most `limit`, then stops the context so that
/// background work (reconnect loops) does not keep run_for busy. Fails the test if the
/// coroutine did not finish, and rethrows whatever it threw.
template <class Fn>
void run_test(asio::io_context& io, Fn fn, std::chrono::steady_clock::duration limit = 10s)
{
    bool done = false;
    std::exception_ptr failure;
    io.restart();
    asio::co_spawn(io, fn(), [&](std::exception_ptr e) {
        done = true;
        failure = e;
        io.stop();
    });
    io.run_for(limit);
    BOOST_TEST_REQUIRE(done, "the test coroutine did not finish within its time cap");
    if (failure)
        std::rethrow_exception(failure);
}

/// Wakes a coroutine that waits for a condition set by callbacks (listeners, completion
/// handlers): they call notify(), the waiter re-checks its predicate. No polling, no sleeps.
class notifier {
public:
    explicit notifier(asio::any_io_executor ex) : timer_(std::move(ex)) {}

    void notify() { timer_.cancel(); }

    /// True once `pred()` holds; false if it still does not after `limit`.
    template <class Pred>
    asio::awaitable<bool> wait(Pred pred, std::chrono::milliseconds limit = 5000ms)
    {
        auto deadline = std::chrono::steady_clock::now() + limit;
        while (!pred()) {
            if (std::chrono::steady_clock::now() >= deadline)
                co_return false;
            timer_.expires_at(deadline);
            boost::system::error_code ec;
            co_await timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        }
        co_return true;
    }

private:
    asio::steady_timer timer_;
};

/// Yields to the event loop until `pred()` holds (for internal progress nobody signals,
/// such as "the writer has taken the batch"); false after `max_turns` turns.
template <class Pred>
asio::awaitable<bool> yield_until(Pred pred, int max_turns = 100000)
{
    auto ex = co_await asio::this_coro::executor;
    for (int i = 0; i < max_turns && !pred(); ++i)
        co_await asio::post(ex, asio::use_awaitable);
    co_return pred();
}

/// Coroutines started together and joined: the first exception any of them throws (a failed
/// BOOST_TEST_REQUIRE) is rethrown by join().
class task_group {
public:
    explicit task_group(asio::any_io_executor ex) : ex_(ex), done_(ex) {}

    void spawn(asio::awaitable<void> task)
    {
        ++started_;
        asio::co_spawn(ex_, std::move(task), [this](std::exception_ptr e) {
            ++finished_;
            if (e && !failure_)
                failure_ = e;
            done_.notify();
        });
    }

    asio::awaitable<void> join(std::chrono::milliseconds limit = 10000ms)
    {
        bool all = co_await done_.wait([this] { return finished_ == started_; }, limit);
        if (failure_)
            std::rethrow_exception(failure_);
        BOOST_TEST_REQUIRE(all, finished_ << " of " << started_ << " tasks finished in time");
    }

private:
    asio::any_io_executor ex_;
    notifier done_;
    int started_ = 0;
    int finished_ = 0;
    std::exception_ptr failure_;
};

struct exec_result {
    boost::system::error_code ec;
    redis::response resp;
};

/// async_exec with errors as values.
inline asio::awaitable<exec_result> exec(redis::connection& conn, const redis::request& req)
{
    auto [ec, resp] = co_await conn.async_exec(req, asio::as_tuple(asio::use_awaitable));
    co_return exec_result{ec, std::move(resp)};
}

inline asio::awaitable<exec_result> exec(redis::connection& conn, const redis::request& req,
                                         std::chrono::milliseconds timeout)
{
    auto [ec, resp] = co_await conn.async_exec(req, timeout, asio::as_tuple(asio::use_awaitable));
    co_return exec_result{ec, std::move(resp)};
}

/// A one-command request.
template <class... Args>
redis::request cmd(std::string_view command, const Args&... args)
{
    redis::request req;
    req.push(command, args...);
    return req;
}

/// async_connect (of a connection or a subscriber) with the error as a value.
template <class Connection>
asio::awaitable<boost::system::error_code> connect(Connection& conn)
{
    auto [ec] = co_await conn.async_connect(asio::as_tuple(asio::use_awaitable));
    co_return ec;
}

/// A holder whose lease was forced away (by the tool or another client): within `round` (a
/// watchdog round, lease / 3, and then some) it learns it lost the lock, and its release says so.
inline asio::awaitable<void> expect_forced_loss(guard& g, std::chrono::milliseconds round = std::chrono::seconds(3))
{
    asio::steady_timer t(co_await asio::this_coro::executor, round);
    co_await t.async_wait(asio::bind_cancellation_slot(g.lost_slot(), asio::as_tuple(asio::use_awaitable)));
    BOOST_TEST(g.is_lost());
    auto [ec] = co_await g.release(asio::as_tuple(asio::use_awaitable));
    BOOST_TEST((ec == dlock::error::lock_lost));
}

}  // namespace dlock::test
