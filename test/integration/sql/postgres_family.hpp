// SPDX-License-Identifier: BSL-1.0
// PostgreSQL as a family of the SQL scenarios (sql/scenarios.hpp): one throwaway server for
// the executable, questions asked of it through psql, and what only PostgreSQL can say.
#pragma once

#include <dlock/error.hpp>
#include <dlock/postgres.hpp>

#include "common/postgres_server.hpp"
#include "integration/sql/support.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/error_code.hpp>

#include <string>

namespace dlock::test {

/// One server for the whole executable (initdb is the slow part); inline: one per program.
inline postgres_server& pg_server()
{
    static postgres_server srv;
    return srv;
}

/// psql's one-number answer.
inline long pg_count(const std::string& sql)
{
    return std::stol(pg_server().psql(sql));
}

/// `text` as a PostgreSQL string literal (standard_conforming_strings: only ' is doubled).
inline std::string pg_literal(const std::string& text)
{
    std::string out = "'";
    for (char c : text)
        out += c == '\'' ? std::string("''") : std::string(1, c);
    return out + "'";
}

/// Rows that mention `name` in the lease table and in its hand-off queue.
inline long pg_rows(const std::string& name, const std::string& table = "dlock_locks")
{
    return pg_count("SELECT (SELECT count(*) FROM " + table + " WHERE name = " + pg_literal(name) +
                    ") + (SELECT count(*) FROM " + table + "_queue WHERE name = " + pg_literal(name) + ")");
}

/// The store's backends waiting for a row lock (a statement blocked behind another's).
inline long pg_lock_waiters()
{
    return pg_count("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'dlock'"
                    " AND wait_event_type = 'Lock'");
}

struct postgres_family {
    using store = dlock::postgres_store;
    using config = dlock::postgres::config;
    static constexpr bool direct_handoff = true;
    static constexpr const char* default_description =
        "postgresql postgresql://app@127.0.0.1:5432/postgres table=dlock_locks";
    /// A worker's count of waiters granted the name by the store's hand-off at a release.
    static constexpr const char* contention_stat = "store_handoffs";
    static constexpr bool free_name_shows_last_token = true;  // a free name's status reads the token sequence
    static constexpr const char* refused_text = "Connection refused";
    static constexpr const char* auth_failed_text = "password authentication failed";
    static constexpr const char* missing_database_text = "does not exist";

    static postgres_server& server() { return pg_server(); }
    static config config_of() { return pg_server().config(); }
    static std::string url() { return pg_server().url(); }
    static long rows(const std::string& name) { return pg_rows(name); }
    static long rows_of_owner(const std::string& owner)
    {
        return pg_count("SELECT count(*) FROM dlock_locks WHERE owner = " + pg_literal(owner));
    }
    /// Waiters for `name`: its hand-off queue's rows.
    static long waiting(const std::string& name)
    {
        return pg_count("SELECT count(*) FROM dlock_locks_queue WHERE name = " + pg_literal(name));
    }
    static bool tables_intact()
    {
        return pg_count("SELECT count(*) FROM pg_class WHERE relname IN"
                        " ('dlock_locks', 'dlock_locks_queue', 'dlock_locks_fence')") == 3;
    }
    static bool is_missing_database(boost::system::error_code ec) { return ec == dlock::error::handshake_failed; }

    /// pg_terminate_backend on every connection of the stores; how many.
    static int kill_connections()
    {
        return std::stoi(pg_server().psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
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
        static bool made = (pg_server().psql("CREATE ROLE nopriv LOGIN PASSWORD 'pw-nopriv'"), true);
        (void)made;
        return {"postgresql://nopriv:pw-nopriv@127.0.0.1:" + std::to_string(pg_server().port()) + "/dlock", "pw-nopriv",
                "permission denied"};
    }
};

}  // namespace dlock::test
