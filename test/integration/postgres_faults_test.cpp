// SPDX-License-Identifier: BSL-1.0
// postgres_store when things go wrong around it: the SQL scenarios of a restart, the
// database down at start-up and the dlock tool (sql/scenarios.hpp); and PostgreSQL's own:
// users short of privileges, a table of the previous version, a waiter cancelled out of
// the queue.
#include "integration/sql/postgres_family.hpp"
#include "integration/sql/scenarios.hpp"

#include <boost/asio/cancellation_signal.hpp>

#include <optional>

using namespace dlock::test;  // its asio alias and chrono literals too
using dlock::test::sql::use_tuple;

namespace {

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

// The SQL scenarios of a server stopped at once (SIGQUIT: no checkpoint, as a crash) and
// started again, of no server at start-up, and of the dlock tool against the live server.
DLOCK_SQL_FAULT_CASES(postgres_family, immediate_restart_under_held_and_waited_locks, the_database_down_at_start_up,
                      the_tool_against_the_live_server)

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
            BOOST_REQUIRE(co_await eventually([&] { return pg_rows("dlock:dml", "dml_locks") == 2; }));
            co_await g.release();
            BOOST_REQUIRE(co_await eventually([&] { return second.has_value(); }));
            BOOST_TEST(*second > g.fencing_token() + 0);
            BOOST_TEST(rb.stats().store_handoffs == 1u);
            BOOST_TEST(co_await eventually([&] { return pg_rows("dlock:dml", "dml_locks") == 0; }));
            auto s = co_await a.async_status("dlock:dml", asio::use_awaitable);  // reads the sequence too
            BOOST_TEST(!s.held);
            BOOST_TEST(s.last_fencing_token >= *second);
            a.close();
            b.close();
        },
        20s);
}

// A lease table of the previous version (no queue, no was_contended, no value) and its lease rows: the
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
    BOOST_TEST(pg_count("SELECT count(*) FROM pg_attribute WHERE attrelid = 'old_locks'::regclass"
                        " AND attname IN ('value', 'value_owner')") == 2);  // an election's value
    BOOST_TEST(pg_count("SELECT count(*) FROM old_locks_queue") == 0);
}

// A table made by its owner before elections existed (no value columns) and a user with
// DML only, who may not add them: its locks work as before, and a proclaim fails at once
// with the server's words, naming the missing column, rather than breaking the locks; so
// does a count-down, whose tables and function it may not create.
BOOST_AUTO_TEST_CASE(elections_need_the_value_columns_but_locks_do_not)
{
    auto& srv = pg_server();
    srv.psql("SET ROLE dlock;"
             " CREATE TABLE prevote_locks (name text PRIMARY KEY, owner text NOT NULL, fence bigint NOT NULL,"
             " expires_at timestamptz NOT NULL, contended boolean NOT NULL DEFAULT false,"
             " was_contended boolean NOT NULL DEFAULT false);"
             " CREATE SEQUENCE prevote_locks_fence;"
             " CREATE TABLE prevote_locks_queue (name text NOT NULL, token text NOT NULL, seq bigint NOT NULL,"
             " ttl_ms bigint NOT NULL, listener int NOT NULL, expires_at timestamptz NOT NULL,"
             " PRIMARY KEY (name, token));"
             " RESET ROLE;"
             " CREATE ROLE voter LOGIN PASSWORD 'pw-voter';"
             " GRANT SELECT, INSERT, UPDATE, DELETE ON prevote_locks, prevote_locks_queue TO voter;"
             " GRANT USAGE ON SEQUENCE prevote_locks_fence TO voter");
    asio::io_context io;
    dlock::postgres_store st(io.get_executor(), as_user("voter", "prevote_locks"));
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto [ec] = co_await st.async_connect(use_tuple);
            BOOST_TEST(!ec, ec.message() << " " << st.last_error_text());
            auto r = co_await st.async_try_acquire("vote", "a", 5s, asio::use_awaitable);
            BOOST_TEST(r.acquired);
            const dlock::lease_key ka{"vote", "a"};
            const std::string value = "v";
            auto [pec, written] = co_await st.elections()->async_proclaim(ka, value, use_tuple);
            BOOST_TEST(pec == dlock::error::server_error, pec.message());
            BOOST_TEST(!dlock::is_transient(pec));
            BOOST_TEST(!written);
            BOOST_TEST(st.last_error_text().find("value") != std::string::npos, st.last_error_text());
            // Nor may it make the latch's tables: a count-down fails for good, with the words.
            const std::string latch = "l", member = "m";
            auto [lec, left] = co_await st.latches()->async_count_down(latch, member, 2, 5s, use_tuple);
            BOOST_TEST(lec == dlock::error::server_error, lec.message() << " " << st.last_error_text());
            BOOST_TEST(!dlock::is_transient(lec));
            BOOST_TEST(st.last_error_text().find("prevote_locks_count_down") != std::string::npos,
                       st.last_error_text());
            BOOST_TEST((co_await st.async_release(ka, asio::use_awaitable)));
            // The operator's override on a free name needs none of the sets' functions.
            auto [fec, freed] = co_await st.async_force_release("vote", use_tuple);
            BOOST_TEST(!fec, fec.message() << " " << st.last_error_text());
            BOOST_TEST(!freed);
            st.close();
        },
        20s);
    BOOST_TEST(pg_count("SELECT count(*) FROM pg_attribute WHERE attrelid = 'prevote_locks'::regclass"
                        " AND attname = 'value'") == 0);
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
            BOOST_REQUIRE(co_await eventually([&] {
                return pg_count("SELECT count(*) FROM dlock_locks_queue WHERE name = 'dlock:cancelled'") == 1;
            }));
            cancel.emit(asio::cancellation_type::terminal);
            BOOST_REQUIRE(co_await eventually([&] { return waiter.has_value(); }));
            BOOST_TEST((*waiter == asio::error::operation_aborted), waiter->message());
            BOOST_TEST(co_await eventually([&] {
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

BOOST_AUTO_TEST_SUITE_END()
