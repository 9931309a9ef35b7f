// SPDX-License-Identifier: BSL-1.0
// What the PostgreSQL test files share: one throwaway server for the executable, and small
// questions asked of it through psql.
#pragma once

#include "common/postgres_server.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <string>

namespace dlock::test {

// One server for the whole executable (initdb is the slow part); inline: one per program.
inline postgres_server& pg_server()
{
    static postgres_server srv;
    return srv;
}

// psql's one-number answer.
inline long pg_count(const std::string& sql)
{
    return std::stol(pg_server().psql(sql));
}

// Rows that mention `name` in the lease table and in its hand-off queue.
inline long pg_rows(const std::string& name, const std::string& table = "dlock_locks")
{
    return pg_count("SELECT (SELECT count(*) FROM " + table + " WHERE name = '" + name + "') + (SELECT count(*) FROM " +
                    table + "_queue WHERE name = '" + name + "')");
}

// True once `pred()` holds, checked every 20 ms for at most `limit`.
template <class Pred>
boost::asio::awaitable<bool> pg_eventually(Pred pred, std::chrono::milliseconds limit = std::chrono::seconds(10))
{
    boost::asio::steady_timer t(co_await boost::asio::this_coro::executor);
    auto end = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
        if (std::chrono::steady_clock::now() >= end)
            co_return false;
        t.expires_after(std::chrono::milliseconds(20));
        co_await t.async_wait(boost::asio::use_awaitable);
    }
    co_return true;
}

}  // namespace dlock::test
