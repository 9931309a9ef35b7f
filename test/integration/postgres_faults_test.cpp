// SPDX-License-Identifier: BSL-1.0
// postgres_store when things go wrong around it: the server restarted under held and waited
// locks, users short of privileges, a table of the previous version, the database down at
// start-up, a waiter cancelled out of the queue, and the dlock tool against a live server.
#include <dlock/dlock.hpp>
#include <dlock/postgres.hpp>

#include "common/child.hpp"
#include "common/redis_server.hpp"  // free_port
#include "integration/postgres_support.hpp"
#include "integration/support.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <sys/wait.h>

#include <chrono>
#include <optional>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using dlock::test::pg_count;
using dlock::test::pg_eventually;
using dlock::test::pg_rows;
using dlock::test::pg_server;
using dlock::test::run_test;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

dlock::postgres::config as_user(const std::string& user, const std::string& table)
{
    auto c = pg_server().config();
    c.user = user;
    c.password = "pw-" + user;
    c.table = table;
    return c;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(postgres_faults)

// Stopped at once (as a crash: no checkpoint) and started again on the same data and port
// while one store holds a name and another waits in its queue: never two holders, the
// waiter gets the name after, and fencing tokens keep rising (the sequence is durable).
BOOST_AUTO_TEST_CASE(immediate_restart_under_held_and_waited_locks)
{
    auto& srv = pg_server();
    asio::io_context io;
    dlock::postgres_store a(io.get_executor(), srv.config());
    dlock::postgres_store b(io.get_executor(), srv.config());
    dlock::postgres_store c(io.get_executor(), srv.config());
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
            std::uint64_t queued = 0;
            BOOST_REQUIRE(co_await pg_eventually([&] {
                queued = std::stoul(srv.psql("SELECT count(*) FROM dlock_locks_queue WHERE name = 'dlock:restart'"));
                return queued == 1;
            }));
            srv.stop(true);
            srv.start();
            BOOST_TEST_MESSAGE("restarted on port " << srv.port());
            // The holder's lease row survived (committed before the crash): nobody else took it.
            auto s = co_await c.async_status("dlock:restart", asio::use_awaitable);
            BOOST_TEST(s.held);
            BOOST_TEST(s.fencing_token == first);
            BOOST_TEST(!waiter_token);
            --holders;
            auto [ec] = co_await g.release(use_tuple);
            BOOST_TEST((!ec || ec == dlock::error::lock_lost || dlock::is_transient(ec)), ec.message());
            BOOST_TEST(co_await pg_eventually([&] { return waiter_token.has_value(); }, 20s));
            BOOST_TEST(most == 1);
            BOOST_TEST(waiter_token.value_or(0) > first);
            // A fresh name after the restart: above every token issued before it.
            auto r = co_await c.async_try_acquire("restart:after", "x", 2s, asio::use_awaitable);
            BOOST_TEST(r.acquired);
            BOOST_TEST(r.fencing_token > waiter_token.value_or(0));
            BOOST_TEST((co_await c.async_release("restart:after", "x", asio::use_awaitable)));
            BOOST_TEST(co_await pg_eventually([&] { return pg_rows("dlock:restart") == 0; }));
            a.close();
            b.close();
            c.close();
        },
        60s);
}

// A user who may not create the tables is told so at once, with the server's reason kept,
// and a lock on it fails rather than retrying.
BOOST_AUTO_TEST_CASE(a_user_without_create_gets_permission_denied)
{
    auto& srv = pg_server();
    srv.psql("CREATE ROLE nocreate LOGIN PASSWORD 'pw-nocreate'");
    asio::io_context io;
    dlock::postgres_store st(io.get_executor(), as_user("nocreate", "nocreate_locks"));
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto [ec] = co_await st.async_connect(use_tuple);
            BOOST_TEST(ec == dlock::error::permission_denied, ec.message());
            BOOST_TEST(!dlock::is_transient(ec));
            BOOST_TEST(st.last_error_text().find("permission denied for schema public") != std::string::npos,
                       st.last_error_text());
            dlock::registry reg(st, {.lease = 2s});
            auto [ec2, g] = co_await reg.obtain("nocreate").acquire(use_tuple);
            BOOST_TEST(ec2 == dlock::error::permission_denied, ec2.message());
            st.close();
        },
        20s);
    BOOST_TEST(pg_count("SELECT count(*) FROM pg_class WHERE relname LIKE 'nocreate_locks%'") == 0);
}

// Tables made by their owner; a user with only SELECT, INSERT, UPDATE, DELETE on both and
// USAGE on the sequence takes, hands off and releases locks.
BOOST_AUTO_TEST_CASE(a_user_with_dml_only_on_precreated_tables)
{
    auto& srv = pg_server();
    asio::io_context io;
    auto owner_cfg = srv.config();
    owner_cfg.table = "dml_locks";
    dlock::postgres_store owner(io.get_executor(), owner_cfg);
    run_test(io, [&]() -> asio::awaitable<void> {
        auto [ec] = co_await owner.async_connect(use_tuple);
        BOOST_TEST(!ec, ec.message());
        owner.close();
    });
    srv.psql("CREATE ROLE dmluser LOGIN PASSWORD 'pw-dmluser'");
    srv.psql("GRANT SELECT, INSERT, UPDATE, DELETE ON dml_locks, dml_locks_queue TO dmluser;"
             " GRANT USAGE ON SEQUENCE dml_locks_fence TO dmluser");
    dlock::postgres_store a(io.get_executor(), as_user("dmluser", "dml_locks"));
    dlock::postgres_store b(io.get_executor(), as_user("dmluser", "dml_locks"));
    dlock::registry ra(a, {.lease = 3s});
    dlock::registry rb(b, {.lease = 3s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto [ec] = co_await a.async_connect(use_tuple);
            BOOST_TEST(!ec, ec.message() << " " << a.last_error_text());
            auto g = co_await ra.obtain("dml").acquire();
            std::optional<std::uint64_t> second;
            asio::co_spawn(
                io,
                [&]() -> asio::awaitable<void> {
                    auto g2 = co_await rb.obtain("dml").acquire();
                    second = g2.fencing_token();
                    co_await g2.release();
                },
                asio::detached);
            BOOST_REQUIRE(co_await pg_eventually([&] { return pg_rows("dlock:dml", "dml_locks") == 2; }));
            co_await g.release();
            BOOST_REQUIRE(co_await pg_eventually([&] { return second.has_value(); }));
            BOOST_TEST(*second > g.fencing_token() + 0);
            BOOST_TEST(rb.stats().store_handoffs == 1u);
            BOOST_TEST(co_await pg_eventually([&] { return pg_rows("dlock:dml", "dml_locks") == 0; }));
            auto s = co_await a.async_status("dlock:dml", asio::use_awaitable);  // reads the sequence too
            BOOST_TEST(!s.held);
            BOOST_TEST(s.last_fencing_token >= *second);
            a.close();
            b.close();
        },
        20s);
}

// A lease table of the previous version (no queue, no was_contended) and its lease rows: the
// new store adds what is missing and takes over where it stood.
BOOST_AUTO_TEST_CASE(a_table_of_the_previous_version_is_upgraded)
{
    auto& srv = pg_server();
    srv.psql("SET ROLE dlock;"
             " CREATE TABLE old_locks (name text PRIMARY KEY, owner text NOT NULL, fence bigint NOT NULL,"
             " expires_at timestamptz NOT NULL, contended boolean NOT NULL DEFAULT false);"
             " CREATE SEQUENCE old_locks_fence START 100;"
             " INSERT INTO old_locks VALUES ('legacy', 'old-owner', 99, clock_timestamp() + interval '1 hour', false)");
    asio::io_context io;
    auto cfg = srv.config();
    cfg.table = "old_locks";
    dlock::postgres_store st(io.get_executor(), cfg);
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto s = co_await st.async_status("legacy", asio::use_awaitable);
            BOOST_TEST(s.held);
            BOOST_TEST(s.holder == "old-owner");
            BOOST_TEST(s.fencing_token == 99u);
            auto r = co_await st.async_try_acquire("legacy", "new", 2s, asio::use_awaitable);
            BOOST_TEST(!r.acquired);
            BOOST_TEST(r.holder_ttl > 3500s);
            auto rn = co_await st.async_renew("legacy", "old-owner", 1h, asio::use_awaitable);
            BOOST_TEST(rn.owned);
            BOOST_TEST(rn.contended);  // "new" asked meanwhile
            BOOST_TEST((co_await st.async_release("legacy", "old-owner", asio::use_awaitable)));
            auto r2 = co_await st.async_try_acquire("legacy", "new", 2s, asio::use_awaitable);
            BOOST_TEST(r2.acquired);
            BOOST_TEST(r2.fencing_token >= 100u);
            BOOST_TEST((co_await st.async_release("legacy", "new", asio::use_awaitable)));
            st.close();
        },
        20s);
    BOOST_TEST(pg_count("SELECT count(*) FROM pg_attribute WHERE attrelid = 'old_locks'::regclass"
                        " AND attname = 'was_contended'") == 1);
    BOOST_TEST(pg_count("SELECT count(*) FROM old_locks_queue") == 0);
}

// Nothing listens on the port: connect, a lock's try and its bounded wait all fail with a
// transient error, within their bounds, and the store works once there is a server.
BOOST_AUTO_TEST_CASE(the_database_down_at_start_up)
{
    asio::io_context io;
    auto cfg = pg_server().config();
    cfg.port = dlock::test::free_port();
    cfg.connect_timeout = 2s;
    dlock::postgres_store st(io.get_executor(), cfg);
    dlock::registry reg(st, {.lease = 2s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto [ec] = co_await st.async_connect(use_tuple);
            BOOST_TEST(ec == dlock::error::connect_failed, ec.message());
            BOOST_TEST(dlock::is_transient(ec));
            BOOST_TEST(st.last_error_text().find("Connection refused") != std::string::npos, st.last_error_text());
            auto [ec2, g] = co_await reg.obtain("down").try_acquire(use_tuple);
            BOOST_TEST(ec2 == dlock::error::connect_failed, ec2.message());
            auto [ec3, g3] = co_await reg.obtain("down").acquire_for(1s, use_tuple);
            BOOST_TEST(ec3 == dlock::error::timeout, ec3.message());
            st.close();
        },
        20s);
}

// A waiter cancelled while queued withdraws its token: no row is left in either table once
// the holder has released, and the holder's release frees the name (nobody to hand it to).
BOOST_AUTO_TEST_CASE(a_cancelled_waiter_leaves_no_queue_row)
{
    auto& srv = pg_server();
    asio::io_context io;
    dlock::postgres_store a(io.get_executor(), srv.config());
    dlock::postgres_store b(io.get_executor(), srv.config());
    dlock::registry ra(a, {.lease = 5s});
    dlock::registry rb(b, {.lease = 5s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto g = co_await ra.obtain("cancelled").acquire();
            asio::cancellation_signal cancel;
            std::optional<boost::system::error_code> waiter;
            rb.obtain("cancelled")
                .acquire(asio::bind_cancellation_slot(
                    cancel.slot(), [&](boost::system::error_code ec, dlock::guard) { waiter = ec; }));
            BOOST_REQUIRE(co_await pg_eventually([&] {
                return pg_count("SELECT count(*) FROM dlock_locks_queue WHERE name = 'dlock:cancelled'") == 1;
            }));
            cancel.emit(asio::cancellation_type::terminal);
            BOOST_REQUIRE(co_await pg_eventually([&] { return waiter.has_value(); }));
            BOOST_TEST((*waiter == asio::error::operation_aborted), waiter->message());
            BOOST_TEST(co_await pg_eventually([&] {
                return pg_count("SELECT count(*) FROM dlock_locks_queue WHERE name = 'dlock:cancelled'") == 0;
            }));
            co_await g.release();
            BOOST_TEST(pg_rows("dlock:cancelled") == 0);
            BOOST_TEST(rb.stats().store_handoffs == 0u);
            a.close();
            b.close();
        },
        20s);
}

#ifdef DLOCK_CLI_PATH
namespace {

struct tool_result {
    int status = -1;
    std::string out;
};

// The dlock tool, run to completion (capped by timeout(1) so that a hang fails).
tool_result dlock_tool(std::vector<std::string> args)
{
    std::vector<std::string> argv{"/bin/sh", "-c", "exec timeout -s KILL 60 \"$0\" \"$@\" 2>&1", DLOCK_CLI_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    int st = 0;
    tool_result r;
    r.out = dlock::test::run_capture(argv, &st);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return r;
}

boost::json::object tool_status(const std::string& name)
{
    auto r = dlock_tool({"status", "--url", pg_server().url(), "--json", name});
    BOOST_TEST_REQUIRE(r.status == 0, r.out);
    return boost::json::parse(r.out).as_object();
}

}  // namespace

// dlock run / status / release --force with a postgresql:// URL, as an operator uses them.
BOOST_AUTO_TEST_CASE(the_tool_against_the_live_server)
{
    auto& srv = pg_server();
    auto r = dlock_tool({"run", "--url", srv.url(), "--lease", "7s", "tool-job", "--", "/bin/sh", "-c",
                         "echo \"$DLOCK_NAME $DLOCK_LEASE_MS\"; exit 7"});
    BOOST_TEST(r.status == 7, r.out);
    BOOST_TEST(r.out == "tool-job 7000");
    auto s = tool_status("tool-job");
    BOOST_TEST(s["held"].as_bool() == false);  // released after the command
    BOOST_TEST(s["last_fencing_token"].as_int64() > 0);
    // A holder, seen by status, freed by release --force: its command is stopped.
    dlock::test::child holder({DLOCK_CLI_PATH, "run", "--url", srv.url(), "--lease", "2s", "tool-held", "--", "/bin/sh",
                               "-c", "echo held; while :; do sleep 0.05; done"});
    auto line = holder.read_line(30s);
    BOOST_REQUIRE((line && *line == "held"));
    auto held = tool_status("tool-held");
    BOOST_TEST(held["held"].as_bool());
    BOOST_TEST(held["fencing_token"].as_int64() > 0);
    auto busy = dlock_tool({"run", "--url", srv.url(), "--wait", "0", "tool-held", "--", "/bin/true"});
    BOOST_TEST(busy.status == 75, busy.out);  // the conflict status
    auto refused = dlock_tool({"release", "--url", srv.url(), "tool-held"});
    BOOST_TEST(refused.status == 2, refused.out);
    auto forced = dlock_tool({"release", "--force", "--url", srv.url(), "tool-held"});
    BOOST_TEST(forced.status == 0, forced.out);
    BOOST_TEST(holder.wait(30s) == 76);  // its lease is gone: the command is stopped
    BOOST_TEST(tool_status("tool-held")["held"].as_bool() == false);
    BOOST_TEST(pg_rows("dlock:tool-held") == 0);
}
#endif

BOOST_AUTO_TEST_SUITE_END()
