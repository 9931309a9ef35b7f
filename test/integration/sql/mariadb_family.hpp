// SPDX-License-Identifier: BSL-1.0
// MariaDB as a family of the SQL scenarios (sql/scenarios.hpp): one throwaway server for the
// executable (with its users dlock, nocreate, nopriv), questions asked of it through the
// mariadb client, and what only MariaDB can say.
#pragma once

#include <dlock/error.hpp>
#include <dlock/mariadb.hpp>

#include "common/mariadb_server.hpp"
#include "integration/sql/support.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>

#include <sstream>
#include <string>

namespace dlock::test {

/// One server for the whole executable.
inline mariadb_server& maria_server()
{
    static mariadb_server srv;
    return srv;
}

/// The client's one-number answer.
inline long maria_count(const std::string& sql)
{
    return std::stol(maria_server().sql(sql));
}

/// `text` as a MariaDB string literal (backslash escapes, NUL as \0).
inline std::string maria_literal(const std::string& text)
{
    std::string out = "'";
    for (char c : text) {
        if (c == '\'' || c == '\\')
            out += '\\';
        out += c == '\0' ? std::string("\\0") : std::string(1, c);
    }
    return out + "'";
}

struct mariadb_family {
    using store = dlock::mariadb_store;
    using config = dlock::mariadb::config;
    static constexpr bool direct_handoff = false;
    static constexpr const char* default_description = "mariadb mariadb://app@127.0.0.1:3306/dlock table=dlock_locks";
    /// A worker's count of waits ended by another's release (GET_LOCK), not by a timer.
    static constexpr const char* contention_stat = "by_notification";
    static constexpr bool free_name_shows_last_token = false;  // a free name has no row, and its status no last token
    static constexpr const char* refused_text = "Can't connect";
    static constexpr const char* auth_failed_text = "Access denied";
    static constexpr const char* missing_database_text = "no_such_db";

    static mariadb_server& server() { return maria_server(); }
    static config config_of() { return maria_server().config(); }
    static std::string url() { return maria_server().url(); }
    static long rows(const std::string& name)
    {
        return maria_count("SELECT COUNT(*) FROM dlock.dlock_locks WHERE name = " + maria_literal(name));
    }
    static long rows_of_owner(const std::string& owner)
    {
        return maria_count("SELECT COUNT(*) FROM dlock.dlock_locks WHERE owner = " + maria_literal(owner));
    }
    /// Waiters: the stores' connections blocked in GET_LOCK (whatever the name: one test at a time).
    static long waiting(const std::string&)
    {
        return maria_count("SELECT COUNT(*) FROM information_schema.processlist WHERE user = 'dlock'"
                           " AND info LIKE 'SELECT GET_LOCK%'");
    }
    static bool tables_intact()
    {
        return maria_count("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'dlock'"
                           " AND table_name IN ('dlock_locks', 'dlock_locks_fence')") == 2;
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
        std::istringstream ids(
            maria_server().sql("SELECT id FROM information_schema.processlist WHERE user = 'dlock'"));
        int n = 0;
        for (std::string id; std::getline(ids, id);)
            if (!id.empty()) {
                try {
                    maria_server().sql("KILL " + id);
                    ++n;
                } catch (const std::exception&) {  // gone meanwhile
                }
            }
        return n;
    }

    /// b's waiter blocked in GET_LOCK on a connection of its own.
    static boost::asio::awaitable<bool> waiter_in_place(store&)
    {
        co_return co_await eventually([] { return waiting("") == 1; });
    }

    struct user {
        std::string url, password, reason;
    };
    static user user_without_rights() { return {maria_server().url("nopriv"), "secret", "Access denied"}; }
};

}  // namespace dlock::test
