// SPDX-License-Identifier: BSL-1.0
// mariadb_store against a throwaway MariaDB: the lock across processes (woken through
// GET_LOCK), the store's connections killed by the server, a server restart, a paused holder,
// a server that is down, bad input and users without privileges, the dlock tool.
#include <dlock/dlock.hpp>
#include <dlock/mariadb.hpp>

#include "common/child.hpp"
#include "common/mariadb_server.hpp"
#include "common/redis_server.hpp"  // free_port, run_capture
#include "integration/mutual_exclusion.hpp"
#include "integration/support.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <filesystem>
#include <sstream>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using dlock::test::mariadb_server;
using dlock::test::run_test;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// One server for the whole suite.
mariadb_server& server()
{
    static mariadb_server srv;
    return srv;
}

// Waits (bounded) until `done()`, polling on the io_context.
asio::awaitable<bool> until(std::function<bool()> done, std::chrono::milliseconds limit)
{
    asio::steady_timer t(co_await asio::this_coro::executor);
    for (auto end = std::chrono::steady_clock::now() + limit; !done();) {
        if (std::chrono::steady_clock::now() > end)
            co_return false;
        t.expires_after(5ms);
        co_await t.async_wait(asio::use_awaitable);
    }
    co_return true;
}

// KILLs every connection of `user`; returns how many.
int kill_connections(const mariadb_server& srv, const std::string& user)
{
    std::istringstream ids(srv.sql("SELECT id FROM information_schema.processlist WHERE user = '" + user + "'"));
    int n = 0;
    for (std::string id; std::getline(ids, id);)
        if (!id.empty()) {
            try {
                srv.sql("KILL " + id);
                ++n;
            } catch (const std::exception&) {  // gone meanwhile
            }
        }
    return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(mariadb)

BOOST_AUTO_TEST_CASE(traits_and_describe)
{
    asio::io_context io;
    dlock::mariadb::config cfg;
    cfg.user = "app";
    cfg.password = "hidden";
    dlock::mariadb_store st(io.get_executor(), cfg);
    auto t = st.traits();
    BOOST_TEST(!t.direct_handoff);
    BOOST_TEST(!t.inherent_queue);
    BOOST_TEST(t.release_notifications);
    BOOST_TEST(t.durable_fencing);
    BOOST_TEST((t.live == dlock::liveness::per_lease));
    BOOST_TEST(t.ttl_granularity == 1ms);
    BOOST_TEST(st.describe() == "mariadb mariadb://app@127.0.0.1:3306/dlock table=dlock_locks");
    BOOST_TEST(st.describe().find("hidden") == std::string::npos);
    cfg.wait_connections = 0;
    dlock::mariadb_store quiet(io.get_executor(), cfg);
    BOOST_TEST(!quiet.traits().release_notifications);
}

// 3 processes x 5 coroutines on one counter file: every section alone, tokens rising, and
// waiters in other processes woken by the holder's release (GET_LOCK), not only by timers.
BOOST_AUTO_TEST_CASE(mutual_exclusion_across_processes)
{
    auto& srv = server();
    char dir[] = "/tmp/dlock-mariaw-XXXXXX";
    BOOST_REQUIRE(::mkdtemp(dir));
    std::string counter = std::string(dir) + "/counter", log = std::string(dir) + "/log";
    constexpr int processes = 3, coroutines = 5, sections = 10;
    std::vector<std::unique_ptr<dlock::test::child>> workers;
    for (int p = 0; p < processes; ++p)
        workers.push_back(std::make_unique<dlock::test::child>(
            std::vector<std::string>{dlock::test::worker_path(), "count", srv.url(), "mx", std::to_string(coroutines),
                                     std::to_string(sections), counter, log, "wait_start"}));
    // All start at once: the release notifications need waiters in other processes.
    for (auto& w : workers)
        BOOST_TEST_REQUIRE((w->read_line(100s) == std::optional<std::string>("ready")));
    for (auto& w : workers)
        w->signal(SIGUSR1);
    long notified = 0;
    for (auto& w : workers) {
        auto line = w->read_line(100s);
        BOOST_TEST_MESSAGE("worker: " << line.value_or("<none>"));
        BOOST_TEST((line && line->rfind("done", 0) == 0));
        if (line && line->find("by_notification=") != std::string::npos)
            notified += std::stol(line->substr(line->find("by_notification=") + 16));
        BOOST_TEST(w->wait() == 0);
    }
    dlock::test::check_count_log(counter, log, processes, processes * coroutines * sections);
    BOOST_TEST(notified > 0);
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
}

// The server kills every connection of the stores (KILL) while one holds the lock and the
// other waits in GET_LOCK: the holder keeps it or loses it cleanly, the waiter gets it with a
// larger token, both stores work again on new connections.
BOOST_AUTO_TEST_CASE(killed_connections)
{
    auto& srv = server();
    asio::io_context io;
    dlock::mariadb_store a(io.get_executor(), srv.config());
    dlock::mariadb_store b(io.get_executor(), srv.config());
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
            // Until b's waiter blocks in GET_LOCK on its own connection (a, b and b's waiter).
            BOOST_REQUIRE(co_await until(
                [&] {
                    return srv.sql("SELECT COUNT(*) FROM information_schema.processlist WHERE user = 'dlock'"
                                   " AND info LIKE 'SELECT GET_LOCK%'") == "1\n";
                },
                10s));
            int killed = kill_connections(srv, "dlock");
            BOOST_TEST_MESSAGE("killed: " << killed);
            BOOST_TEST(killed >= 3);
            auto [ec] = co_await g.release(use_tuple);
            BOOST_TEST_MESSAGE("holder's release: " << ec.message());
            BOOST_TEST((!ec || ec == dlock::error::lock_lost || dlock::is_transient(ec)), ec.message());
            BOOST_TEST(co_await until([&] { return waiter_done; }, 15s));
            BOOST_TEST(waiter_token > first);
            auto r = co_await a.async_try_acquire("killed:after", "x", 1s, asio::use_awaitable);
            BOOST_TEST(r.acquired);
            BOOST_TEST((co_await a.async_release("killed:after", "x", asio::use_awaitable)));
            a.close();
            b.close();
        },
        40s);
}

// The server restarts (SIGKILL, then at once again on the same data and port) while a lock is
// held and waited for: the holder keeps it or loses it cleanly, the waiter gets it, fencing
// tokens go on rising (the sequence is durable).
BOOST_AUTO_TEST_CASE(server_restart)
{
    auto& srv = server();
    asio::io_context io;
    dlock::mariadb_store a(io.get_executor(), srv.config());
    dlock::mariadb_store b(io.get_executor(), srv.config());
    dlock::registry ra(a, {.lease = 3s});
    dlock::registry rb(b, {.lease = 3s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto g = co_await ra.obtain("restart").acquire();
            const auto first = g.fencing_token();
            bool waiter_done = false;
            std::uint64_t waiter_token = 0;
            asio::co_spawn(
                io,
                [&]() -> asio::awaitable<void> {
                    auto g2 = co_await rb.obtain("restart").acquire();
                    waiter_token = g2.fencing_token();
                    waiter_done = true;
                    co_await g2.release();
                },
                asio::detached);
            asio::steady_timer t(io, 200ms);  // the waiter's first attempt and its wait start
            co_await t.async_wait(asio::use_awaitable);
            srv.stop(true);
            srv.start();
            // The holder's watchdog renews on the restarted server (or finds the lease gone).
            t.expires_after(1500ms);
            co_await t.async_wait(asio::bind_cancellation_slot(g.lost_slot(), use_tuple));
            BOOST_TEST_MESSAGE("holder lost: " << g.is_lost());
            BOOST_TEST(!waiter_done);  // exclusion held across the restart
            auto [ec] = co_await g.release(use_tuple);
            BOOST_TEST((!ec || ec == dlock::error::lock_lost || dlock::is_transient(ec)), ec.message());
            BOOST_TEST(co_await until([&] { return waiter_done; }, 15s));
            BOOST_TEST(waiter_token > first);
            a.close();
            b.close();
        },
        40s);
}

// A holder stopped (SIGSTOP) past its lease: the next holder gets a larger token, and the
// paused one, resumed, finds out that it lost the lock.
BOOST_AUTO_TEST_CASE(paused_holder_loses_the_lock)
{
    auto& srv = server();
    dlock::test::child holder({dlock::test::worker_path(), "hold", srv.url(), "paused", "1000"});
    auto line = holder.read_line(30s);
    BOOST_REQUIRE(line);
    BOOST_REQUIRE(line->rfind("acquired ", 0) == 0);
    const auto old_token = std::stoull(line->substr(9));
    holder.signal(SIGSTOP);
    asio::io_context io;
    dlock::mariadb_store st(io.get_executor(), srv.config());
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

// Issue 29, item 4: A's acquire stalls after drawing its token and before it reaches the
// name's row (a trigger holds A's INSERT on a user lock, as a stalled thread would; a
// mariadbd thread cannot be stopped by itself); B acquires and releases meanwhile; A goes
// on. Tokens must rise in grant order: A's, drawn first, used to be granted after B's.
BOOST_AUTO_TEST_CASE(fencing_tokens_rise_in_grant_order_past_a_stalled_acquire)
{
    auto& srv = server();
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
    const std::string pause_id = line->substr(2);
    struct cleanup {
        const mariadb_server& srv;
        std::string id;
        void unpause()
        {
            if (!id.empty())
                srv.sql("KILL " + std::exchange(id, {}));
        }
        ~cleanup()
        {
            unpause();
            srv.sql("DROP TRIGGER IF EXISTS dlock.dlock_test_pause");
        }
    } guard{srv, pause_id};
    auto users_locked = [&] {  // acquires held in the trigger
        return std::stoi(srv.sql("SELECT COUNT(*) FROM information_schema.processlist WHERE state = 'User lock'"
                                 " AND info LIKE 'SET @dlock_test = %'"));
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
            BOOST_REQUIRE(co_await until([&] { return users_locked() == 1; }, 10s));
            auto rb = co_await b.async_try_acquire(name, "b", 10s, asio::use_awaitable);
            if (rb.acquired) {
                grants.emplace_back("b", rb.fencing_token);
                BOOST_TEST((co_await b.async_release(name, "b", asio::use_awaitable)));
            }
            BOOST_TEST(!got_a);
            guard.unpause();
            BOOST_REQUIRE(co_await until([&] { return got_a.has_value(); }, 10s));
            BOOST_TEST(got_a->acquired);
            BOOST_TEST(grants.size() == 2u);
            for (std::size_t i = 1; i < grants.size(); ++i) {
                BOOST_TEST_MESSAGE(grants[i - 1].first << " " << grants[i - 1].second << ", then " << grants[i].first
                                                       << " " << grants[i].second);
                BOOST_TEST(grants[i].second > grants[i - 1].second,
                           grants[i].first << "'s token " << grants[i].second << " is not above " << grants[i - 1].first
                                           << "'s " << grants[i - 1].second);
            }
            BOOST_TEST((co_await a.async_release(name, "a", asio::use_awaitable)));
            a.close();
            b.close();
        },
        40s);
    pause.wait(30s);
}

// Nothing listens on the port: a clear transient error, within the bounds, no hang.
BOOST_AUTO_TEST_CASE(server_down_at_start)
{
    asio::io_context io;
    auto cfg = server().config();
    cfg.port = dlock::test::free_port();
    cfg.connect_timeout = 1s;
    dlock::mariadb_store st(io.get_executor(), cfg);
    dlock::registry reg(st, {.lease = 2s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto [ec] = co_await st.async_connect(use_tuple);
            BOOST_TEST(ec == dlock::error::connect_failed, ec.message() << " " << st.last_error_text());
            BOOST_TEST(dlock::is_transient(ec));
            BOOST_TEST(!st.last_error_text().empty());
            auto [ec2, g] = co_await reg.obtain("down").acquire_for(1s, use_tuple);
            BOOST_TEST(!!ec2);
            BOOST_TEST_MESSAGE("acquire_for: " << ec2.message());
            st.close();
        },
        15s);
}

BOOST_AUTO_TEST_CASE(bad_input)
{
    auto& srv = server();
    asio::io_context io;
    dlock::mariadb_store st(io.get_executor(), srv.config());
    auto wrong_pw = srv.config();
    wrong_pw.password = "wrong";
    dlock::mariadb_store bad_pw(io.get_executor(), wrong_pw);
    auto no_db = srv.config();
    no_db.database = "no_such_db";
    dlock::mariadb_store missing(io.get_executor(), no_db);
    dlock::mariadb_store nopriv(io.get_executor(), srv.config("nopriv"));
    dlock::mariadb_store nocreate(io.get_executor(), srv.config("nocreate"));
    auto nocreate_cfg = srv.config("nocreate");
    nocreate_cfg.table = "other_locks";
    dlock::mariadb_store nocreate_new(io.get_executor(), nocreate_cfg);
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            // Names SQL would trip over are data: hex literals, never spliced as text.
            std::vector<std::string> names{"it's",
                                           "back\\slash",
                                           "back\\",
                                           "\"quoted\" `ticked`",
                                           std::string("nul\0byte", 8),
                                           std::string("\0", 1),
                                           "x'); DROP TABLE dlock_locks; --",
                                           "\xc3\xa9t\xc3\xa9",
                                           "bad\xff utf-8",
                                           "Case",
                                           "case",
                                           std::string(2000, 'x')};
            for (const auto& name : names) {
                auto [ec, r] = co_await st.async_try_acquire(name, "tok'en\\", 2s, use_tuple);
                BOOST_TEST(!ec, name.substr(0, 40) << ": " << ec.message() << " " << st.last_error_text());
                BOOST_TEST(r.acquired, name.substr(0, 40));
                auto s = co_await st.async_status(name, asio::use_awaitable);
                BOOST_TEST(s.holder == "tok'en\\");
            }
            // Distinct rows, byte for byte (no collation folds "Case" into "case").
            BOOST_TEST(srv.sql("SELECT COUNT(*) FROM dlock.dlock_locks WHERE owner = 'tok\\'en\\\\'") ==
                       std::to_string(names.size()) + "\n");
            BOOST_TEST(srv.sql("SELECT COUNT(*) FROM dlock.dlock_locks WHERE name = 'nul\\0byte'") == "1\n");
            for (const auto& name : names)
                BOOST_TEST((co_await st.async_release(name, "tok'en\\", asio::use_awaitable)), name.substr(0, 40));
            BOOST_TEST(srv.sql("SELECT COUNT(*) FROM dlock.dlock_locks WHERE owner = 'tok\\'en\\\\'") == "0\n");
            auto [ec1, r1] = co_await st.async_try_acquire(std::string(10'000, 'y'), "t", 2s, use_tuple);
            BOOST_TEST(ec1 == dlock::error::invalid_name);
            auto [ec2, r2] = co_await st.async_try_acquire("", "t", 2s, use_tuple);
            BOOST_TEST(ec2 == dlock::error::invalid_name);
            auto [ec3, r3] = co_await st.async_try_acquire("x", "t", 0ms, use_tuple);
            BOOST_TEST(ec3 == dlock::error::invalid_lease);
            auto [ec4] = co_await bad_pw.async_connect(use_tuple);
            BOOST_TEST(ec4 == dlock::error::auth_failed, ec4.message() << " " << bad_pw.last_error_text());
            BOOST_TEST(!dlock::is_transient(ec4));
            // MariaDB answers "access denied" (1044) for a database the user has no rights on,
            // whether or not it exists: no way to tell them apart without global privileges.
            auto [ec5] = co_await missing.async_connect(use_tuple);
            BOOST_TEST((ec5 == dlock::error::handshake_failed || ec5 == dlock::error::permission_denied),
                       ec5.message() << " " << missing.last_error_text());
            BOOST_TEST(!dlock::is_transient(ec5));
            BOOST_TEST(missing.last_error_text().find("no_such_db") != std::string::npos, missing.last_error_text());
            auto [ec6] = co_await nopriv.async_connect(use_tuple);
            BOOST_TEST(ec6 == dlock::error::permission_denied, ec6.message() << " " << nopriv.last_error_text());
            // Without CREATE: the existing table works, a missing one is refused clearly.
            auto [ec7, r7] = co_await nocreate.async_try_acquire("nc", "t", 2s, use_tuple);
            BOOST_TEST(!ec7, ec7.message() << " " << nocreate.last_error_text());
            BOOST_TEST(r7.acquired);
            auto [ec8, r8] = co_await nocreate_new.async_try_acquire("nc", "t", 2s, use_tuple);
            BOOST_TEST(ec8 == dlock::error::permission_denied, ec8.message() << " " << nocreate_new.last_error_text());
            BOOST_TEST(nocreate_new.last_error_text().find("CREATE") != std::string::npos,
                       nocreate_new.last_error_text());
            // A registry on a permanent error fails at once instead of retrying.
            dlock::registry reg(bad_pw, {.lease = 2s});
            auto [ec9, g9] = co_await reg.obtain("x").acquire_for(5s, use_tuple);
            BOOST_TEST(ec9 == dlock::error::auth_failed, ec9.message());
            // The table is intact.
            BOOST_TEST(srv.sql("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'dlock'"
                               " AND table_name IN ('dlock_locks', 'dlock_locks_fence')") == "2\n");
            st.close();
            bad_pw.close();
            missing.close();
            nopriv.close();
            nocreate.close();
            nocreate_new.close();
        },
        30s);
}

#ifdef DLOCK_CLI_PATH
// The tool on MariaDB: `dlock run` runs under the lock, `status` shows the holder's token,
// `release --force` deletes the holder's row, which its watchdog then notices.
BOOST_AUTO_TEST_CASE(the_tool_runs_reports_and_forces_a_release)
{
    auto& srv = server();
    const std::string cli = DLOCK_CLI_PATH;
    int status = -1;
    auto out = dlock::test::run_capture(
        {cli, "run", "--url", srv.url(), "tool", "--", "sh", "-c", "echo ran $DLOCK_FENCING_TOKEN"}, &status);
    BOOST_TEST(WEXITSTATUS(status) == 0, out);
    BOOST_TEST(out.find("ran ") != std::string::npos, out);
    asio::io_context io;
    dlock::mariadb_store store(io.get_executor(), srv.config());
    dlock::registry reg(store, {.lease = 3s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto g = co_await reg.obtain("f").acquire();
            auto st = dlock::test::run_capture({cli, "status", "--json", "--url", srv.url(), "f"}, &status);
            BOOST_TEST(WEXITSTATUS(status) == 0, st);
            BOOST_TEST(st.find("\"held\":true") != std::string::npos, st);
            BOOST_TEST(st.find("\"fencing_token\":" + std::to_string(g.fencing_token())) != std::string::npos, st);
            auto busy =
                dlock::test::run_capture({cli, "run", "--wait", "0", "--url", srv.url(), "f", "--", "true"}, &status);
            BOOST_TEST(WEXITSTATUS(status) == 75, busy);
            auto refused = dlock::test::run_capture({cli, "release", "--url", srv.url(), "f"}, &status);
            BOOST_TEST(WEXITSTATUS(status) == 2, refused);
            auto rel = dlock::test::run_capture({cli, "release", "--force", "--url", srv.url(), "f"}, &status);
            BOOST_TEST(WEXITSTATUS(status) == 0, rel);
            BOOST_TEST(rel.find("held") != std::string::npos, rel);
            asio::steady_timer t(io, 3s);  // a watchdog round (lease / 3) and then some
            co_await t.async_wait(asio::bind_cancellation_slot(g.lost_slot(), asio::as_tuple(asio::use_awaitable)));
            BOOST_TEST(g.is_lost());
            auto [ec] = co_await g.release(asio::as_tuple(asio::use_awaitable));
            BOOST_TEST((ec == dlock::error::lock_lost));
            store.close();
        },
        60s);
    // A user without rights: exit 69 and the server's reason on stderr, the password hidden.
    auto bad =
        dlock::test::run_capture({"/bin/sh", "-c", cli + " status --url '" + srv.url("nopriv") + "' f 2>&1"}, &status);
    BOOST_TEST(WEXITSTATUS(status) == 69, bad);
    BOOST_TEST(bad.find("Access denied") != std::string::npos, bad);
    BOOST_TEST(bad.find("secret") == std::string::npos, bad);  // the password never shows
}
#endif

BOOST_AUTO_TEST_SUITE_END()
