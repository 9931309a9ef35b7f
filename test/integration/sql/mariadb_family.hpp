// SPDX-License-Identifier: BSL-1.0
// MariaDB as a family of the SQL scenarios (sql/scenarios.hpp): its store, questions asked of
// its server (users dlock, nocreate, nopriv) through the mariadb client, and what only MariaDB
// can say.
#pragma once

#include <dlock/error.hpp>
#include <dlock/mariadb.hpp>

#include "common/mariadb_server.hpp"
#include "integration/sql/support.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <sstream>
#include <string>

namespace dlock::test {

struct mariadb_family : sql_family_base<mariadb_family, mariadb_server, dlock::mariadb_store> {
    // A release hands the name to the first queued waiter, which learns of it by the doorbell
    // and retries (by_notification counts them); a free name has no row, so its status has
    // no last token.
    static constexpr sql_words words{.direct_handoff = true,
                                     .description = "mariadb mariadb://app@127.0.0.1:3306/dlock table=dlock_locks",
                                     .contention_stat = "by_notification",
                                     .free_name_shows_last_token = false,
                                     .refused_text = "Can't connect",
                                     .auth_failed_text = "Access denied",
                                     .missing_database_text = "no_such_db",
                                     .lease_table = "dlock.dlock_locks"};

    static std::string ask(const std::string& sql) { return server().sql(sql); }
    /// Backslash escapes, NUL as \0.
    static std::string literal(const std::string& text)
    {
        std::string out = "'";
        for (char c : text) {
            if (c == '\'' || c == '\\')
                out += '\\';
            out += c == '\0' ? std::string("\\0") : std::string(1, c);
        }
        return out + "'";
    }
    /// Waiters queued for `name` (any name if empty): the hand-off queue's rows.
    static long waiting(const std::string& name)
    {
        return count("SELECT COUNT(*) FROM dlock.dlock_locks_queue" +
                     (name.empty() ? std::string() : " WHERE name = " + literal(name)));
    }
    /// Rows that mention `name` in the lease table and in its hand-off queue.
    static long rows(const std::string& name) { return lease_rows("name", name) + waiting(name); }
    static bool tables_intact()
    {
        return count("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'dlock'"
                     " AND table_name IN ('dlock_locks', 'dlock_locks_fence', 'dlock_locks_queue')") == 3;
    }
    /// MariaDB answers "access denied" (1044) for a database the user has no rights on,
    /// whether or not it exists: no way to tell them apart without global privileges.
    static bool is_missing_database(boost::system::error_code ec)
    {
        return ec == dlock::error::handshake_failed || ec == dlock::error::permission_denied;
    }

    /// KILLs every connection of the user `dlock`; how many.
    static int kill_connections()
    {
        std::istringstream ids(ask("SELECT id FROM information_schema.processlist WHERE user = 'dlock'"));
        int n = 0;
        for (std::string id; std::getline(ids, id);)
            if (!id.empty()) {
                try {
                    ask("KILL " + id);
                    ++n;
                } catch (const std::exception&) {  // gone meanwhile
                }
            }
        return n;
    }

    /// b's waiter queued (its sleeper's connection its liveness).
    static boost::asio::awaitable<bool> waiter_in_place(store&)
    {
        co_return co_await eventually([] { return waiting("") == 1; });
    }

    struct user {
        std::string url, password, reason;
    };
    static user user_without_rights() { return {server().url("nopriv"), "secret", "Access denied"}; }
};

/// Asks `count` (a number) again until it is at least `n`, for at most 20 s (a test's process
/// outside the io_context: a worker process's progress, seen at the server).
template <class Count>
bool mariadb_reaches(Count count, long n)
{
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline)
        if (count() >= n)
            return true;
    return false;
}

/// Stores' sleepers enrolled at the doorbell for `name` (0 before the first store made the table).
inline long mariadb_enrolled(const std::string& name)
{
    try {
        return mariadb_family::count("SELECT COUNT(*) FROM dlock.dlock_locks_bell WHERE name = " +
                                     mariadb_family::literal(name));
    } catch (const std::exception&) {
        return 0;
    }
}

}  // namespace dlock::test
