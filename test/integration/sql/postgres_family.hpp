// SPDX-License-Identifier: BSL-1.0
// PostgreSQL as a family of the SQL scenarios (sql/scenarios.hpp): its store, questions asked
// of its server through psql, and what only PostgreSQL can say.
#pragma once

#include <dlock/error.hpp>
#include <dlock/postgres.hpp>

#include "common/postgres_server.hpp"
#include "integration/sql/support.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <string>

namespace dlock::test {

struct postgres_family : sql_family_base<postgres_family, postgres_server, dlock::postgres_store> {
    // A hand-off grants queued waiters (store_handoffs counts them); a free name's status
    // reads the token sequence.
    static constexpr sql_words words{.direct_handoff = true,
                                     .description =
                                         "postgresql postgresql://app@127.0.0.1:5432/postgres table=dlock_locks",
                                     .contention_stat = "store_handoffs",
                                     .free_name_shows_last_token = true,
                                     .refused_text = "Connection refused",
                                     .auth_failed_text = "password authentication failed",
                                     .missing_database_text = "does not exist",
                                     .lease_table = "dlock_locks"};

    static std::string ask(const std::string& sql) { return server().psql(sql); }
    /// standard_conforming_strings: only ' is doubled.
    static std::string literal(const std::string& text)
    {
        std::string out = "'";
        for (char c : text)
            out += c == '\'' ? std::string("''") : std::string(1, c);
        return out + "'";
    }
    /// Waiters for `name`: its hand-off queue's rows.
    static long waiting(const std::string& name)
    {
        return count("SELECT count(*) FROM dlock_locks_queue WHERE name = " + literal(name));
    }
    /// Rows that mention `name` in the lease table and in its hand-off queue.
    static long rows(const std::string& name) { return lease_rows("name", name) + waiting(name); }
    static bool tables_intact()
    {
        return count("SELECT count(*) FROM pg_class WHERE relname IN"
                     " ('dlock_locks', 'dlock_locks_queue', 'dlock_locks_fence')") == 3;
    }
    static bool is_missing_database(boost::system::error_code ec) { return ec == dlock::error::handshake_failed; }

    /// pg_terminate_backend on every connection of the stores; how many.
    static int kill_connections()
    {
        return static_cast<int>(count("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                                      " WHERE application_name = 'dlock'"));
    }

    /// `b` connected and its listener (the connection its waiters are woken on) listening.
    static boost::asio::awaitable<bool> waiter_in_place(store& b)
    {
        co_await b.async_connect(boost::asio::use_awaitable);
        bool listening = false;
        auto w = b.watch("waiter", [&](dlock::watch_event ev) { listening |= ev == dlock::watch_event::ready; });
        bool ok = co_await eventually([&] { return listening; });
        b.unwatch(w);
        co_return ok;
    }

    struct user {
        std::string url, password, reason;
    };
    /// A role that may log in and nothing more (created once).
    static user user_without_rights()
    {
        static bool made = (ask("CREATE ROLE nopriv LOGIN PASSWORD 'pw-nopriv'"), true);
        (void)made;
        return {"postgresql://nopriv:pw-nopriv@127.0.0.1:" + std::to_string(server().port()) + "/dlock", "pw-nopriv",
                "permission denied"};
    }
};

/// The server of the executable, and psql's one-number answer.
inline postgres_server& pg_server()
{
    return postgres_family::server();
}
inline long pg_count(const std::string& sql)
{
    return postgres_family::count(sql);
}

/// Asks `count` (a number) again until it is at least `n`, for at most 20 s (a test's process
/// outside the io_context: a worker process's progress, seen at the server).
template <class Count>
bool pg_reaches(Count count, long n)
{
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline)
        if (count() >= n)
            return true;
    return false;
}

/// Rows that mention `name` in `table` and in its hand-off queue.
inline long pg_rows(const std::string& name, const std::string& table = "dlock_locks")
{
    const auto n = postgres_family::literal(name);
    return pg_count("SELECT (SELECT count(*) FROM " + table + " WHERE name = " + n + ") + (SELECT count(*) FROM " +
                    table + "_queue WHERE name = " + n + ")");
}

/// The store's backends waiting for a row lock (a statement blocked behind another's).
inline long pg_lock_waiters()
{
    return pg_count("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'dlock'"
                    " AND wait_event_type = 'Lock'");
}

}  // namespace dlock::test
