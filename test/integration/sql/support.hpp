// SPDX-License-Identifier: BSL-1.0
// What the SQL scenarios and the SQL stores' own tests share that names no store: a bounded
// poll, a worker's statistic, tokens in grant order, and the dlock tool run to completion.
#pragma once

#include "common/redis_server.hpp"  // run_capture

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <sys/wait.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dlock::test {

/// True once `pred()` holds, checked every 20 ms for at most `limit` (a server's state
/// nobody signals: rows, waiting connections).
template <class Pred>
boost::asio::awaitable<bool> eventually(Pred pred, std::chrono::milliseconds limit = std::chrono::seconds(10))
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

/// "KEY=N" in a lock_worker's "done ..." line (0 if absent).
inline std::uint64_t worker_stat(const std::string& line, const std::string& key)
{
    auto at = line.find(key + "=");
    return at == std::string::npos ? 0u : std::stoull(line.substr(at + key.size() + 1));
}

/// Grants (who, token) in the order they were granted: each token above the one before it,
/// the first above `floor`.
inline void check_grant_order(const std::vector<std::pair<std::string, std::uint64_t>>& grants, std::uint64_t floor)
{
    for (std::size_t i = 0; i < grants.size(); ++i) {
        const auto before = i == 0 ? floor : grants[i - 1].second;
        BOOST_TEST_MESSAGE("granted to " << grants[i].first << " with token " << grants[i].second);
        BOOST_TEST(grants[i].second > before,
                   grants[i].first << "'s token " << grants[i].second << " is not above " << before);
    }
}

/// What a store says that the scenarios check, in its own words.
struct sql_words {
    bool direct_handoff;                ///< traits(): a release grants the name to a queued waiter
    const char* description;            ///< describe() of a default config for the user "app"
    const char* contention_stat;        ///< the worker statistic that counts waiters reached through the store
    bool free_name_shows_last_token;    ///< a free name's status has the last token issued
    const char* refused_text;           ///< in last_error_text() when nothing listens
    const char* auth_failed_text;       ///< in last_error_text() on a wrong password
    const char* missing_database_text;  ///< in last_error_text() on a database that does not exist
    const char* lease_table;            ///< the lease table as the server's client names it
};

/// What a family's adapter (sql/postgres_family.hpp, sql/mariadb_family.hpp) does alike
/// whatever the store: one Server for the executable (starting it is the slow part), its
/// config and URL, and the lease table's rows counted through Family::ask (the store's own
/// client) with Family::literal quoting the values.
template <class Family, class Server, class Store>
struct sql_family_base {
    using store = Store;
    using config = decltype(std::declval<Server&>().config());
    static Server& server()
    {
        static Server srv;
        return srv;
    }
    static config config_of() { return server().config(); }
    static std::string url() { return server().url(); }
    static long count(const std::string& sql) { return std::stol(Family::ask(sql)); }
    static long lease_rows(const std::string& column, const std::string& value)
    {
        return count(std::string("SELECT COUNT(*) FROM ") + Family::words.lease_table + " WHERE " + column + " = " +
                     Family::literal(value));
    }
    static long rows(const std::string& name) { return lease_rows("name", name); }
    static long rows_of_owner(const std::string& owner) { return lease_rows("owner", owner); }
};

struct tool_result {
    int status = -1;
    std::string out;  ///< stdout and stderr
};

#ifdef DLOCK_CLI_PATH
/// The dlock tool, run to completion (capped by timeout(1) so that a hang fails).
inline tool_result dlock_tool(std::vector<std::string> args)
{
    std::vector<std::string> argv{"/bin/sh", "-c", "exec timeout -s KILL 60 \"$0\" \"$@\" 2>&1", DLOCK_CLI_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    int st = 0;
    tool_result r;
    r.out = run_capture(argv, &st);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return r;
}
#endif

}  // namespace dlock::test
