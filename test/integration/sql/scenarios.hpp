// SPDX-License-Identifier: BSL-1.0
// The SQL stores' scenarios, written once and run by PostgreSQL and MariaDB alike: each is a
// function template over a family F (sql/postgres_family.hpp, sql/mariadb_family.hpp) that
// names the store, its server and the few things only the store can say (how to cut its
// connections, what waits on it, its words for an error). The per-store test files make them
// test cases with DLOCK_SQL_STORE_CASES and DLOCK_SQL_FAULT_CASES (at the end).
#pragma once

#include <dlock/dlock.hpp>

#include "common/child.hpp"
#include "common/redis_server.hpp"  // free_port
#include "common/scratch_dir.hpp"
#include "integration/mutual_exclusion.hpp"
#include "integration/sql/support.hpp"
#include "integration/support.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace dlock::test::sql {

namespace asio = boost::asio;
using namespace std::chrono_literals;
inline constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

/// Runs `body(st)` (a coroutine) on a store of the family's server, then closes the store.
template <class F, class Body>
void with_store(Body body, std::chrono::seconds limit = 20s)
{
    asio::io_context io;
    typename F::store st(io.get_executor(), F::config_of());
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            co_await body(st);
            st.close();
        },
        limit);
}

/// The traits a SQL store declares, and a description that names user, host, database and
/// table but never the password.
template <class F>
void traits_and_describe()
{
    asio::io_context io;
    typename F::config cfg;
    cfg.user = "app";
    cfg.password = "hidden";
    typename F::store st(io.get_executor(), cfg);
    auto t = st.traits();
    BOOST_TEST(t.direct_handoff == F::words.direct_handoff);
    BOOST_TEST(!t.inherent_queue);
    BOOST_TEST(t.release_notifications);
    BOOST_TEST(t.durable_fencing);
    BOOST_TEST((t.live == dlock::liveness::per_lease));
    BOOST_TEST(t.ttl_granularity == 1ms);
    BOOST_TEST(st.describe() == F::words.description);
    BOOST_TEST(st.describe().find("hidden") == std::string::npos);
}

/// 3 processes x 5 coroutines on one counter file: every section alone, tokens rising. The
/// test holds the name until every process waits on the store, so that at least its release
/// reaches waiters in other processes through the store (F::words.contention_stat counts them),
/// however fast one process would otherwise finish alone.
template <class F>
void mutual_exclusion_across_processes()
{
    const std::string dir = dlock::test::scratch_dir("dlock-sqlw");
    std::string counter = std::string(dir) + "/counter", log = std::string(dir) + "/log";
    constexpr int processes = 3, coroutines = 5, sections = 10;
    std::vector<std::unique_ptr<child>> workers;
    asio::io_context io;
    typename F::store holder(io.get_executor(), F::config_of());
    dlock::registry reg(holder, {.lease = 10s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto g = co_await reg.obtain("mx").acquire();
            for (int p = 0; p < processes; ++p)
                workers.push_back(
                    std::make_unique<child>(count_worker(F::url(), "mx", coroutines, sections, counter, log)));
            BOOST_TEST(co_await eventually([&] { return F::waiting("dlock:mx") == processes; }, 60s));
            co_await g.release();
            holder.close();
        },
        90s);
    std::uint64_t through_store = 0;
    for (auto& line : expect_all_done(workers, 150s))
        through_store += worker_stat(line, F::words.contention_stat);
    // Exact count, tokens rising in file order, each token one process's; and the name went
    // from process to process through the store (a hand-off, or a release notification).
    check_count_log(counter, log, processes, processes * coroutines * sections);
    BOOST_TEST(through_store > 0u, F::words.contention_stat);
    // Every waiter got the name or withdrew: nothing is left.
    BOOST_TEST(F::rows("dlock:mx") == 0);
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
}

/// The server cuts every connection of the stores while one holds a lock and the other
/// waits for it: the holder keeps it or loses it cleanly, the waiter gets it with a larger
/// token, both stores work again on new connections.
template <class F>
void killed_connections()
{
    asio::io_context io;
    typename F::store a(io.get_executor(), F::config_of());
    typename F::store b(io.get_executor(), F::config_of());
    dlock::registry ra(a, {.lease = 2s});
    dlock::registry rb(b, {.lease = 2s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto g = co_await ra.obtain("killed").acquire();
            const auto first = g.fencing_token();
            bool waiter_done = false;
            std::uint64_t waiter_token = 0;
            asio::co_spawn(
                io,
                [&]() -> asio::awaitable<void> {
                    auto g2 = co_await rb.obtain("killed").acquire();
                    waiter_token = g2.fencing_token();
                    waiter_done = true;
                    co_await g2.release();
                },
                asio::detached);
            // Until b waits on a connection of its own (a's, b's and b's waiting one).
            BOOST_REQUIRE(co_await F::waiter_in_place(b));
            int killed = F::kill_connections();
            BOOST_TEST_MESSAGE("killed: " << killed);
            BOOST_TEST(killed >= 3);
            auto [ec] = co_await g.release(use_tuple);
            BOOST_TEST_MESSAGE("holder's release: " << ec.message());
            BOOST_TEST((!ec || ec == dlock::error::lock_lost || dlock::is_transient(ec)), ec.message());
            BOOST_TEST(co_await eventually([&] { return waiter_done; }, 15s));
            BOOST_TEST(waiter_token > first);
            auto r = co_await a.async_try_acquire("killed:after", "x", 1s, asio::use_awaitable);
            BOOST_TEST(r.acquired);
            BOOST_TEST((co_await a.async_release("killed:after", "x", asio::use_awaitable)));
            a.close();
            b.close();
        },
        40s);
}

/// Killed at once (no clean shutdown) and started again on the same data and port while one
/// store holds a name and another waits for it: never two holders, the waiter gets the name
/// after, and fencing tokens keep rising (the sequence is durable).
template <class F>
void server_restart()
{
    auto& srv = F::server();
    asio::io_context io;
    typename F::store a(io.get_executor(), F::config_of());
    typename F::store b(io.get_executor(), F::config_of());
    typename F::store c(io.get_executor(), F::config_of());
    dlock::registry ra(a, {.lease = 5s});
    dlock::registry rb(b, {.lease = 5s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            int holders = 0, most = 0;
            auto g = co_await ra.obtain("restart").acquire();
            ++holders;
            const auto first = g.fencing_token();
            std::optional<std::uint64_t> waiter_token;
            asio::co_spawn(
                io,
                [&]() -> asio::awaitable<void> {
                    auto g2 = co_await rb.obtain("restart").acquire();
                    most = std::max(most, ++holders);
                    waiter_token = g2.fencing_token();
                    --holders;
                    co_await g2.release();
                },
                asio::detached);
            BOOST_REQUIRE(co_await eventually([&] { return F::waiting("dlock:restart") == 1; }));
            srv.stop(true);
            srv.start();
            BOOST_TEST_MESSAGE("restarted on port " << srv.port());
            // The holder's lease row survived (committed before the crash): nobody else took it.
            auto s = co_await c.async_status("dlock:restart", asio::use_awaitable);
            BOOST_TEST(s.held);
            BOOST_TEST(s.fencing_token == first);
            // The holder's watchdog renews on the restarted server (or finds the lease gone).
            asio::steady_timer t(io, 1500ms);
            co_await t.async_wait(asio::bind_cancellation_slot(g.lost_slot(), use_tuple));
            BOOST_TEST_MESSAGE("holder lost: " << g.is_lost());
            BOOST_TEST(!waiter_token);  // exclusion held across the restart
            --holders;
            auto [ec] = co_await g.release(use_tuple);
            BOOST_TEST((!ec || ec == dlock::error::lock_lost || dlock::is_transient(ec)), ec.message());
            BOOST_TEST(co_await eventually([&] { return waiter_token.has_value(); }, 20s));
            BOOST_TEST(most == 1);
            BOOST_TEST(waiter_token.value_or(0) > first);
            // A fresh name after the restart: above every token issued before it.
            auto r = co_await c.async_try_acquire("restart:after", "x", 2s, asio::use_awaitable);
            BOOST_TEST(r.acquired);
            BOOST_TEST(r.fencing_token > waiter_token.value_or(0));
            BOOST_TEST((co_await c.async_release("restart:after", "x", asio::use_awaitable)));
            BOOST_TEST(co_await eventually([&] { return F::rows("dlock:restart") == 0; }));
            a.close();
            b.close();
            c.close();
        },
        60s);
}

/// A holder stopped (SIGSTOP) past its lease: the next holder gets a larger token, and the
/// paused one, resumed, finds out that it lost the lock.
template <class F>
void paused_holder_loses_the_lock()
{
    child holder({worker_path(), "hold", F::url(), "paused", "1000"});
    auto line = holder.read_line(30s);
    BOOST_REQUIRE(line);
    BOOST_REQUIRE(line->rfind("acquired ", 0) == 0);
    const auto old_token = std::stoull(line->substr(9));
    holder.signal(SIGSTOP);
    asio::io_context io;
    typename F::store st(io.get_executor(), F::config_of());
    dlock::registry reg(st, {.lease = 2s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto g = co_await reg.obtain("paused").acquire();
            BOOST_TEST(g.fencing_token() > old_token);
            holder.signal(SIGCONT);
            auto out = holder.read_line(30s);
            BOOST_TEST_MESSAGE("holder: " << out.value_or("<none>"));
            BOOST_TEST((out && out->rfind("lost=1", 0) == 0));
            co_await g.release();
            st.close();
        },
        40s);
    BOOST_TEST(holder.wait() == 0);
}

/// Nothing listens on the port: connect, a lock's try and its bounded wait all fail with a
/// transient error in the system's words, within their bounds.
template <class F>
void server_down_at_start()
{
    asio::io_context io;
    auto cfg = F::config_of();
    cfg.port = free_port();
    cfg.connect_timeout = 2s;
    typename F::store st(io.get_executor(), cfg);
    dlock::registry reg(st, {.lease = 2s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto [ec] = co_await st.async_connect(use_tuple);
            BOOST_TEST(ec == dlock::error::connect_failed, ec.message() << " " << st.last_error_text());
            BOOST_TEST(dlock::is_transient(ec));
            BOOST_TEST(st.last_error_text().find(F::words.refused_text) != std::string::npos, st.last_error_text());
            auto [ec2, g] = co_await reg.obtain("down").try_acquire(use_tuple);
            BOOST_TEST(ec2 == dlock::error::connect_failed, ec2.message());
            auto [ec3, g3] = co_await reg.obtain("down").acquire_for(1s, use_tuple);
            BOOST_TEST(ec3 == dlock::error::timeout, ec3.message());
            st.close();
        },
        20s);
}

/// Names and tokens SQL would trip over are data, never spliced: each its own row, byte for
/// byte (no collation folds "Case" into "case"), and the tables intact after.
template <class F>
asio::awaitable<void> odd_names_are_data(typename F::store& st)
{
    const std::string token = "tok'en\\";
    std::vector<std::string> names{"it's",
                                   "back\\slash",
                                   "back\\",
                                   "\"quoted\" `ticked`",
                                   "semi; DROP TABLE dlock_locks; --",
                                   "x'); DROP TABLE dlock_locks; --",
                                   "\xc3\xa9t\xc3\xa9",
                                   "Case",
                                   "case",
                                   std::string(2000, 'x')};
    for (const auto& name : names) {
        auto [ec, r] = co_await st.async_try_acquire(name, token, 2s, use_tuple);
        BOOST_TEST(!ec, name.substr(0, 40) << ": " << ec.message() << " " << st.last_error_text());
        BOOST_TEST(r.acquired, name.substr(0, 40));
        auto s = co_await st.async_status(name, asio::use_awaitable);
        BOOST_TEST(s.holder == token);
    }
    BOOST_TEST(F::rows_of_owner(token) == static_cast<long>(names.size()));
    for (const auto& name : names)
        BOOST_TEST((co_await st.async_release(name, token, asio::use_awaitable)), name.substr(0, 40));
    BOOST_TEST(F::rows_of_owner(token) == 0);
    BOOST_TEST(F::tables_intact());
}

/// What every SQL store refuses before the wire, with the code that says why.
template <class F>
asio::awaitable<void> out_of_bounds_is_refused(typename F::store& st)
{
    auto [ec1, r1] = co_await st.async_try_acquire(std::string(10'000, 'y'), "t", 2s, use_tuple);
    BOOST_TEST(ec1 == dlock::error::invalid_name);
    auto [ec2, r2] = co_await st.async_try_acquire("", "t", 2s, use_tuple);
    BOOST_TEST(ec2 == dlock::error::invalid_name);
    auto [ec3, r3] = co_await st.async_try_acquire("ten-kb-token", std::string(10'000, 't'), 2s, use_tuple);
    BOOST_TEST(ec3 == dlock::error::invalid_name);
    auto [ec4, r4] = co_await st.async_status(std::string(10'000, 'z'), use_tuple);
    BOOST_TEST(ec4 == dlock::error::invalid_name);
    auto [ec5, r5] = co_await st.async_try_acquire("x", "t", 31 * 24h, use_tuple);
    BOOST_TEST(ec5 == dlock::error::invalid_lease);
    auto [ec6, r6] = co_await st.async_try_acquire("x", "t", 0ms, use_tuple);
    BOOST_TEST(ec6 == dlock::error::invalid_lease);
}

/// Odd names, refused input, a wrong password, a missing database, a server not there: each
/// a clear code, the permanent ones failing a lock at once instead of retrying.
template <class F>
void bad_input()
{
    asio::io_context io;
    typename F::store st(io.get_executor(), F::config_of());
    auto wrong_pw = F::config_of();
    wrong_pw.password = "wrong";
    typename F::store bad_pw(io.get_executor(), wrong_pw);
    auto no_db = F::config_of();
    no_db.database = "no_such_db";
    typename F::store missing(io.get_executor(), no_db);
    auto nowhere = F::config_of();
    nowhere.port = free_port();
    typename F::store down(io.get_executor(), nowhere);
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            co_await odd_names_are_data<F>(st);
            co_await out_of_bounds_is_refused<F>(st);
            auto [ec4] = co_await bad_pw.async_connect(use_tuple);
            BOOST_TEST(ec4 == dlock::error::auth_failed, ec4.message() << " " << bad_pw.last_error_text());
            BOOST_TEST(!dlock::is_transient(ec4));
            BOOST_TEST(bad_pw.last_error_text().find(F::words.auth_failed_text) != std::string::npos,
                       bad_pw.last_error_text());
            BOOST_TEST(bad_pw.last_error_text().find("wrong") == std::string::npos);  // the password is not echoed
            {
                // A lock on a wrong password fails at once (permanent), it does not retry.
                dlock::registry reg(bad_pw, {.lease = 2s});
                auto [ecr, gr] = co_await reg.obtain("pw").acquire(use_tuple);
                BOOST_TEST(ecr == dlock::error::auth_failed, ecr.message());
            }
            auto [ec5] = co_await missing.async_connect(use_tuple);
            BOOST_TEST(F::is_missing_database(ec5), ec5.message() << " " << missing.last_error_text());
            BOOST_TEST(!dlock::is_transient(ec5));
            BOOST_TEST(missing.last_error_text().find("no_such_db") != std::string::npos, missing.last_error_text());
            BOOST_TEST(missing.last_error_text().find(F::words.missing_database_text) != std::string::npos,
                       missing.last_error_text());
            auto [ec6] = co_await down.async_connect(use_tuple);
            BOOST_TEST(ec6 == dlock::error::connect_failed, ec6.message() << " " << down.last_error_text());
            BOOST_TEST(dlock::is_transient(ec6));
            st.close();
            bad_pw.close();
            missing.close();
            down.close();
        },
        30s);
}

#ifdef DLOCK_CLI_PATH
/// `dlock status --json NAME`, parsed.
template <class F>
boost::json::object tool_status(const std::string& name)
{
    auto r = dlock_tool({"status", "--url", F::url(), "--json", name});
    BOOST_TEST_REQUIRE(r.status == 0, r.out);
    return boost::json::parse(r.out).as_object();
}

/// `dlock run` runs a command under the lock with the lock's name, lease and token in its
/// environment and exits with its status; `status` shows a holder and its token; a second
/// `run` is refused with the conflict status, a plain `release` with 2.
template <class F>
void the_tool_runs_and_reports()
{
    auto r = dlock_tool({"run", "--url", F::url(), "--lease", "7s", "tool-job", "--", "/bin/sh", "-c",
                         "echo \"$DLOCK_NAME $DLOCK_LEASE_MS\"; echo \"ran $DLOCK_FENCING_TOKEN\"; exit 7"});
    BOOST_TEST(r.status == 7, r.out);
    BOOST_TEST(r.out.rfind("tool-job 7000\nran ", 0) == 0, r.out);
    BOOST_TEST(std::stoull("0" + r.out.substr(r.out.find("ran ") + 4)) > 0u, r.out);
    auto s = tool_status<F>("tool-job");
    BOOST_TEST(s["held"].as_bool() == false);  // released after the command
    BOOST_TEST((s["last_fencing_token"].as_int64() > 0) == F::words.free_name_shows_last_token);
    asio::io_context io;
    typename F::store store(io.get_executor(), F::config_of());
    dlock::registry reg(store, {.lease = 3s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto g = co_await reg.obtain("f").acquire();
            auto held = tool_status<F>("f");
            BOOST_TEST(held["held"].as_bool());
            BOOST_TEST(held["fencing_token"].as_int64() == static_cast<std::int64_t>(g.fencing_token()));
            auto busy = dlock_tool({"run", "--wait", "0", "--url", F::url(), "f", "--", "true"});
            BOOST_TEST(busy.status == 75, busy.out);  // the conflict status
            auto refused = dlock_tool({"release", "--url", F::url(), "f"});
            BOOST_TEST(refused.status == 2, refused.out);
            // release --force deletes the holder's row, which its watchdog then notices.
            auto forced = dlock_tool({"release", "--force", "--url", F::url(), "f"});
            BOOST_TEST(forced.status == 0, forced.out);
            BOOST_TEST(forced.out.find("held") != std::string::npos, forced.out);
            co_await expect_forced_loss(g);
            store.close();
        },
        60s);
}

/// A `dlock run` whose lease is forced away stops its command (status 76), and leaves no
/// row; a user without rights gets 69 and the server's reason, the password hidden.
template <class F>
void the_tool_forces_a_release_and_reports_refusals()
{
    child holder({DLOCK_CLI_PATH, "run", "--url", F::url(), "--lease", "2s", "tool-held", "--", "/bin/sh", "-c",
                  "echo held; while :; do sleep 0.05; done"});
    auto line = holder.read_line(30s);
    BOOST_REQUIRE((line && *line == "held"));
    auto held = tool_status<F>("tool-held");
    BOOST_TEST(held["held"].as_bool());
    BOOST_TEST(held["fencing_token"].as_int64() > 0);
    auto forced = dlock_tool({"release", "--force", "--url", F::url(), "tool-held"});
    BOOST_TEST(forced.status == 0, forced.out);
    BOOST_TEST(holder.wait(30s) == 76);  // its lease is gone: the command is stopped
    BOOST_TEST(tool_status<F>("tool-held")["held"].as_bool() == false);
    BOOST_TEST(F::rows("dlock:tool-held") == 0);
    const auto user = F::user_without_rights();
    auto bad = dlock_tool({"status", "--url", user.url, "f"});
    BOOST_TEST(bad.status == 69, bad.out);
    BOOST_TEST(bad.out.find(user.reason) != std::string::npos, bad.out);
    BOOST_TEST(bad.out.find(user.password) == std::string::npos, bad.out);  // the password never shows
}

/// The tool against the live server, as an operator uses it.
template <class F>
void the_tool()
{
    the_tool_runs_and_reports<F>();
    the_tool_forces_a_release_and_reports_refusals<F>();
}
#endif

}  // namespace dlock::test::sql

// The scenarios as a store's test cases, under the names each store's suite gave them before
// they were shared (so that Boost's and ctest's names stay as they were).
#define DLOCK_SQL_STORE_CASES(F, killed)                                                                               \
    BOOST_AUTO_TEST_CASE(traits_and_describe)                                                                          \
    {                                                                                                                  \
        dlock::test::sql::traits_and_describe<F>();                                                                    \
    }                                                                                                                  \
    BOOST_AUTO_TEST_CASE(mutual_exclusion_across_processes)                                                            \
    {                                                                                                                  \
        dlock::test::sql::mutual_exclusion_across_processes<F>();                                                      \
    }                                                                                                                  \
    BOOST_AUTO_TEST_CASE(killed)                                                                                       \
    {                                                                                                                  \
        dlock::test::sql::killed_connections<F>();                                                                     \
    }                                                                                                                  \
    BOOST_AUTO_TEST_CASE(paused_holder_loses_the_lock)                                                                 \
    {                                                                                                                  \
        dlock::test::sql::paused_holder_loses_the_lock<F>();                                                           \
    }                                                                                                                  \
    BOOST_AUTO_TEST_CASE(bad_input)                                                                                    \
    {                                                                                                                  \
        dlock::test::sql::bad_input<F>();                                                                              \
    }

#ifdef DLOCK_CLI_PATH
#define DLOCK_SQL_TOOL_CASE(F, tool)                                                                                   \
    BOOST_AUTO_TEST_CASE(tool)                                                                                         \
    {                                                                                                                  \
        dlock::test::sql::the_tool<F>();                                                                               \
    }
#else
#define DLOCK_SQL_TOOL_CASE(F, tool)
#endif

#define DLOCK_SQL_FAULT_CASES(F, restart, down, tool)                                                                  \
    BOOST_AUTO_TEST_CASE(restart)                                                                                      \
    {                                                                                                                  \
        dlock::test::sql::server_restart<F>();                                                                         \
    }                                                                                                                  \
    BOOST_AUTO_TEST_CASE(down)                                                                                         \
    {                                                                                                                  \
        dlock::test::sql::server_down_at_start<F>();                                                                   \
    }                                                                                                                  \
    DLOCK_SQL_TOOL_CASE(F, tool)
