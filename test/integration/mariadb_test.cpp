// SPDX-License-Identifier: BSL-1.0
// mariadb_store against a throwaway MariaDB: the SQL scenarios (sql/scenarios.hpp) and what
// only MariaDB has: a store without waiting connections, an acquire stalled in a trigger,
// names as bytes (NUL included, compared without collation), users without privileges.
#include "integration/sql/mariadb_family.hpp"
#include "integration/sql/scenarios.hpp"

using namespace dlock::test;  // its asio alias and chrono literals too
using dlock::test::sql::use_tuple;

BOOST_AUTO_TEST_SUITE(mariadb)

// The SQL scenarios; the connections are cut by KILL (the waiter's in GET_LOCK among them),
// the server restarted after SIGKILL.
DLOCK_SQL_STORE_CASES(mariadb_family, killed_connections)
DLOCK_SQL_FAULT_CASES(mariadb_family, server_restart, server_down_at_start, the_tool_runs_reports_and_forces_a_release)

// Without GET_LOCK waiting connections a release still reaches a waiter in another store, by
// the doorbell: the waiter is handed the name and woken by the ring, long before the holder's
// lease (30 s, beyond the test's bound) would have ended its sleep.
BOOST_AUTO_TEST_CASE(the_doorbell_wakes_a_waiter_without_wait_connections)
{
    asio::io_context io;
    auto quiet_cfg = mariadb_family::server().config();
    quiet_cfg.wait_connections = 0;
    dlock::mariadb_store holder(io.get_executor(), mariadb_family::server().config()),
        quiet(io.get_executor(), quiet_cfg);
    BOOST_TEST(quiet.traits().release_notifications);
    dlock::registry ra(holder, {.lease = 30s}), rb(quiet, {.lease = 30s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto g = co_await ra.obtain("bell").acquire();
            const auto first = g.fencing_token();
            std::optional<std::uint64_t> got;
            asio::co_spawn(
                io,
                [&]() -> asio::awaitable<void> {
                    auto g2 = co_await rb.obtain("bell").acquire();
                    got = g2.fencing_token();
                    co_await g2.release();
                },
                asio::detached);
            BOOST_REQUIRE(co_await eventually([] { return mariadb_family::waiting("dlock:bell") == 1; }));
            // The sleeper is enrolled for the name, and nobody waits in GET_LOCK.
            BOOST_TEST(mariadb_family::count("SELECT COUNT(*) FROM dlock.dlock_locks_bell WHERE name = 'dlock:bell'") ==
                       1);
            BOOST_TEST(mariadb_family::count("SELECT COUNT(*) FROM information_schema.processlist"
                                             " WHERE info LIKE 'SELECT GET_LOCK%'") == 0);
            co_await g.release();
            BOOST_REQUIRE(co_await eventually([&] { return got.has_value(); }, 20s));
            BOOST_TEST(*got > first);
            BOOST_TEST(rb.stats().woken_by_notification >= 1u);
            BOOST_TEST(rb.stats().woken_by_timer == 0u);
            co_await rb.async_drain();
            // The waiter's enrolment and queue place went with its wait.
            BOOST_TEST(co_await eventually([] {
                return mariadb_family::count("SELECT COUNT(*) FROM dlock.dlock_locks_bell WHERE name = 'dlock:bell'") ==
                       0;
            }));
            BOOST_TEST(mariadb_family::rows("dlock:bell") == 0);
            holder.close();
            quiet.close();
        },
        25s);
}

// A user who may not create the bell table (and finds none) still gets every wake-up, slower:
// a mutex's waiter by its GET_LOCK wait, a latch's waiter by the once-a-second re-check.
BOOST_AUTO_TEST_CASE(without_a_bell_table_waiters_still_wake)
{
    auto& srv = mariadb_family::server();
    asio::io_context io;
    auto owner_cfg = srv.config(), user_cfg = srv.config("nocreate");
    owner_cfg.table = user_cfg.table = "nobell_locks";
    dlock::mariadb_store owner(io.get_executor(), owner_cfg), a(io.get_executor(), user_cfg),
        b(io.get_executor(), user_cfg);
    dlock::registry ra(a, {.lease = 30s}), rb(b, {.lease = 30s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            BOOST_REQUIRE(!std::get<0>(co_await owner.async_connect(use_tuple)));  // the tables
            owner.close();
            srv.sql("DROP TABLE dlock.nobell_locks_bell");
            auto g = co_await ra.obtain("nb").acquire();
            std::optional<std::uint64_t> got;
            asio::co_spawn(
                io,
                [&]() -> asio::awaitable<void> {
                    auto g2 = co_await rb.obtain("nb").acquire();
                    got = g2.fencing_token();
                    co_await g2.release();
                },
                asio::detached);
            BOOST_REQUIRE(co_await eventually([] {
                return mariadb_family::count("SELECT COUNT(*) FROM information_schema.processlist"
                                             " WHERE info LIKE 'SELECT GET_LOCK%'") == 1;
            }));
            co_await g.release();
            BOOST_TEST(co_await eventually([&] { return got.has_value(); }, 10s));  // the lease is 30 s
            dlock::latch l(rb, "nbl", 1), counter(ra, "nbl", 1);
            bool woken = false;
            l.wait([&](boost::system::error_code ec) { woken = !ec; });
            co_await counter.count_down(asio::use_awaitable);
            BOOST_TEST(co_await eventually([&] { return woken; }, 10s));
            BOOST_TEST(srv.sql("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'dlock'"
                               " AND table_name = 'nobell_locks_bell'") == "0\n");
            co_await ra.async_drain();
            co_await rb.async_drain();
            a.close();
            b.close();
        },
        40s);
}

// Issue 29, item 4: A's acquire stalls after drawing its token and before it reaches the
// name's row (a trigger holds A's INSERT on a user lock, as a stalled thread would; a
// mariadbd thread cannot be stopped by itself); B acquires and releases meanwhile; A goes
// on. Tokens must rise in grant order: A's, drawn first, used to be granted after B's.
BOOST_AUTO_TEST_CASE(fencing_tokens_rise_in_grant_order_past_a_stalled_acquire)
{
    auto& srv = mariadb_family::server();
    asio::io_context io;
    dlock::mariadb_store a(io.get_executor(), srv.config());
    dlock::mariadb_store b(io.get_executor(), srv.config());
    const std::string name = "fence-order";
    // Another process holds the user lock the trigger waits on, until it is KILLed.
    dlock::test::child pause({"/usr/bin/mariadb", "--no-defaults", "-h127.0.0.1", "-P" + std::to_string(srv.port()),
                              "-udlock", "-psecret", "-N", "-B", "--unbuffered", "-e",
                              "SELECT GET_LOCK('dlock_test_pause', 0), CONNECTION_ID(); DO SLEEP(300)"});
    auto line = pause.read_line(30s);
    BOOST_REQUIRE(line);
    BOOST_REQUIRE(line->rfind("1\t", 0) == 0);
    struct cleanup {
        std::string id;
        void unpause()
        {
            if (!id.empty())
                mariadb_family::server().sql("KILL " + std::exchange(id, {}));
        }
        ~cleanup()
        {
            unpause();
            mariadb_family::server().sql("DROP TRIGGER IF EXISTS dlock.dlock_test_pause");
        }
    } guard{line->substr(2)};
    auto users_locked = [&] {  // acquires held in the trigger
        return mariadb_family::count("SELECT COUNT(*) FROM information_schema.processlist WHERE state = 'User lock'"
                                     " AND info LIKE 'SET @dlock_test = %'");
    };
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            BOOST_REQUIRE(!std::get<0>(co_await a.async_connect(use_tuple)));  // the table exists
            srv.sql("CREATE TRIGGER dlock.dlock_test_pause BEFORE INSERT ON dlock.dlock_locks FOR EACH ROW"
                    " SET @dlock_test = IF(NEW.owner = 'a', GET_LOCK('dlock_test_pause', 60) +"
                    " RELEASE_LOCK('dlock_test_pause'), NULL)");
            std::vector<std::pair<std::string, std::uint64_t>> grants;  // in grant order
            std::optional<dlock::acquire_result> got_a;
            a.async_try_acquire(name, "a", 10s, [&](boost::system::error_code ec, dlock::acquire_result r) {
                BOOST_TEST(!ec, ec.message());
                if (r.acquired)
                    grants.emplace_back("a", r.fencing_token);
                got_a = r;
            });
            BOOST_REQUIRE(co_await eventually([&] { return users_locked() == 1; }));
            auto rb = co_await b.async_try_acquire(name, "b", 10s, asio::use_awaitable);
            if (rb.acquired) {
                grants.emplace_back("b", rb.fencing_token);
                BOOST_TEST((co_await b.async_release(name, "b", asio::use_awaitable)));
            }
            BOOST_TEST(!got_a);
            guard.unpause();
            BOOST_REQUIRE(co_await eventually([&] { return got_a.has_value(); }));
            BOOST_TEST(got_a->acquired);
            BOOST_TEST(grants.size() == 2u);
            dlock::test::check_grant_order(grants, 0);
            BOOST_TEST((co_await a.async_release(name, "a", asio::use_awaitable)));
            a.close();
            b.close();
        },
        40s);
    pause.wait(30s);
}

// Names are hex literals, never text: NUL bytes and invalid UTF-8 are names of their own,
// each its own row.
BOOST_AUTO_TEST_CASE(names_are_bytes)
{
    sql::with_store<mariadb_family>([](dlock::mariadb_store& st) -> asio::awaitable<void> {
        const std::string token = "bytes";
        std::vector<std::string> names{std::string("nul\0byte", 8), std::string("\0", 1), "bad\xff utf-8",
                                       "bad\xfe utf-8"};
        for (const auto& name : names) {
            auto [ec, r] = co_await st.async_try_acquire(name, token, 2s, use_tuple);
            BOOST_TEST(!ec, name.substr(0, 40) << ": " << ec.message() << " " << st.last_error_text());
            BOOST_TEST(r.acquired, name.substr(0, 40));
            BOOST_TEST((co_await st.async_status(name, asio::use_awaitable)).holder == token);
        }
        BOOST_TEST(mariadb_family::rows_of_owner(token) == static_cast<long>(names.size()));
        BOOST_TEST(mariadb_family::rows(std::string("nul\0byte", 8)) == 1);
        for (const auto& name : names)
            BOOST_TEST((co_await st.async_release(name, token, asio::use_awaitable)), name.substr(0, 40));
        BOOST_TEST(mariadb_family::rows_of_owner(token) == 0);
    });
}

// A user without rights on the database is refused; one without CREATE works on the
// existing table and is refused a new one clearly.
BOOST_AUTO_TEST_CASE(users_without_privileges)
{
    auto& srv = mariadb_family::server();
    asio::io_context io;
    dlock::mariadb_store owner(io.get_executor(), srv.config());  // makes the table
    dlock::mariadb_store nopriv(io.get_executor(), srv.config("nopriv"));
    dlock::mariadb_store nocreate(io.get_executor(), srv.config("nocreate"));
    auto nocreate_cfg = srv.config("nocreate");
    nocreate_cfg.table = "other_locks";
    dlock::mariadb_store nocreate_new(io.get_executor(), nocreate_cfg);
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            BOOST_REQUIRE(!std::get<0>(co_await owner.async_connect(use_tuple)));
            auto [ec6] = co_await nopriv.async_connect(use_tuple);
            BOOST_TEST(ec6 == dlock::error::permission_denied, ec6.message() << " " << nopriv.last_error_text());
            auto [ec7, r7] = co_await nocreate.async_try_acquire("nc", "t", 2s, use_tuple);
            BOOST_TEST(!ec7, ec7.message() << " " << nocreate.last_error_text());
            BOOST_TEST(r7.acquired);
            auto [ec8, r8] = co_await nocreate_new.async_try_acquire("nc", "t", 2s, use_tuple);
            BOOST_TEST(ec8 == dlock::error::permission_denied, ec8.message() << " " << nocreate_new.last_error_text());
            BOOST_TEST(nocreate_new.last_error_text().find("CREATE") != std::string::npos,
                       nocreate_new.last_error_text());
            owner.close();
            nopriv.close();
            nocreate.close();
            nocreate_new.close();
        },
        30s);
}

BOOST_AUTO_TEST_SUITE_END()
