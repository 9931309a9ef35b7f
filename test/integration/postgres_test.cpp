// SPDX-License-Identifier: BSL-1.0
// postgres_store against a throwaway PostgreSQL 15: the lock across processes, the store's
// connections terminated by the server, a paused holder, bad input.
#include <dlock/dlock.hpp>
#include <dlock/postgres.hpp>

#include "common/child.hpp"
#include "common/postgres_server.hpp"
#include "common/redis_server.hpp"  // free_port
#include "integration/mutual_exclusion.hpp"
#include "integration/postgres_support.hpp"
#include "integration/support.hpp"
#include "postgres/sql.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/test/unit_test.hpp>

#include <libpq-fe.h>
#include <signal.h>
#include <stdlib.h>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using dlock::test::postgres_server;
using dlock::test::run_test;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

postgres_server& server()
{
    return dlock::test::pg_server();
}

// "store_handoffs=N" in a worker's "done ..." line.
unsigned store_handoffs(const std::string& line)
{
    auto at = line.find("store_handoffs=");
    return at == std::string::npos ? 0u : static_cast<unsigned>(std::stoul(line.substr(at + 15)));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(postgres)

BOOST_AUTO_TEST_CASE(traits_and_describe)
{
    asio::io_context io;
    dlock::postgres::config cfg;
    cfg.user = "app";
    cfg.password = "hidden";
    dlock::postgres_store st(io.get_executor(), cfg);
    auto t = st.traits();
    BOOST_TEST(t.direct_handoff);
    BOOST_TEST(!t.inherent_queue);
    BOOST_TEST(t.release_notifications);
    BOOST_TEST(t.durable_fencing);
    BOOST_TEST((t.live == dlock::liveness::per_lease));
    BOOST_TEST(t.ttl_granularity == 1ms);
    BOOST_TEST(st.describe() == "postgresql postgresql://app@127.0.0.1:5432/postgres table=dlock_locks");
}

BOOST_AUTO_TEST_CASE(mutual_exclusion_across_processes)
{
    auto& srv = server();
    char dir[] = "/tmp/dlock-pgw-XXXXXX";
    BOOST_REQUIRE(::mkdtemp(dir));
    std::string counter = std::string(dir) + "/counter", log = std::string(dir) + "/log";
    constexpr int processes = 3, coroutines = 5, sections = 10;
    std::vector<std::unique_ptr<dlock::test::child>> workers;
    // The test holds the name until every process waits in the store's queue: at least its
    // release is a store hand-off, however fast one process would otherwise finish alone.
    asio::io_context io;
    dlock::postgres_store holder(io.get_executor(), srv.config());
    dlock::registry reg(holder, {.lease = 10s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto g = co_await reg.obtain("mx").acquire();
            for (int p = 0; p < processes; ++p)
                workers.push_back(std::make_unique<dlock::test::child>(
                    std::vector<std::string>{dlock::test::worker_path(), "count", srv.url(), "mx",
                                             std::to_string(coroutines), std::to_string(sections), counter, log}));
            BOOST_TEST(co_await dlock::test::pg_eventually([&] { return dlock::test::pg_rows("dlock:mx") == 1 + processes; }, 60s));
            co_await g.release();
            holder.close();
        },
        90s);
    unsigned handoffs = 0;
    for (auto& w : workers) {
        auto line = w->read_line(150s);
        BOOST_TEST_MESSAGE("worker: " << line.value_or("<none>"));
        BOOST_TEST((line && line->rfind("done", 0) == 0));
        handoffs += store_handoffs(line.value_or(""));
        BOOST_TEST(w->wait() == 0);
    }
    // Exact count, tokens rising in file order, each token one process's; and the name went
    // from process to process by the store's hand-off (queued waiters granted at a release).
    dlock::test::check_count_log(counter, log, processes, processes * coroutines * sections);
    BOOST_TEST(handoffs > 0u);
    // Every queued waiter got the name or withdrew: nothing is left in either table.
    BOOST_TEST(dlock::test::pg_rows("dlock:mx") == 0);
}

// The server terminates every connection of the stores (pg_terminate_backend) while a lock
// is held: the holder keeps it or loses it cleanly, the waiter gets it, nothing hangs.
BOOST_AUTO_TEST_CASE(terminated_connections)
{
    auto& srv = server();
    asio::io_context io;
    dlock::postgres_store a(io.get_executor(), srv.config());
    dlock::postgres_store b(io.get_executor(), srv.config());
    dlock::registry ra(a, {.lease = 2s});
    dlock::registry rb(b, {.lease = 2s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto g = co_await ra.obtain("terminated").acquire();
            const auto first = g.fencing_token();
            bool waiter_done = false;
            std::uint64_t waiter_token = 0;
            asio::co_spawn(
                io,
                [&]() -> asio::awaitable<void> {
                    auto g2 = co_await rb.obtain("terminated").acquire();
                    waiter_token = g2.fencing_token();
                    waiter_done = true;
                    co_await g2.release();
                },
                asio::detached);
            // Both stores connected and b listening, then cut every connection.
            co_await b.async_connect(asio::use_awaitable);
            bool listening = false;
            auto w =
                b.watch("terminated", [&](dlock::watch_event ev) { listening |= ev == dlock::watch_event::ready; });
            asio::steady_timer poll(io);
            for (int i = 0; i < 1000 && !listening; ++i) {
                poll.expires_after(5ms);
                co_await poll.async_wait(asio::use_awaitable);
            }
            BOOST_REQUIRE(listening);
            b.unwatch(w);
            auto killed = srv.psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                                   " WHERE application_name = 'dlock'");
            BOOST_TEST_MESSAGE("terminated: " << killed);
            BOOST_TEST(std::stoi(killed) >= 3);  // a's, b's and b's listener
            auto [ec] = co_await g.release(use_tuple);
            BOOST_TEST_MESSAGE("holder's release: " << ec.message());
            BOOST_TEST((!ec || ec == dlock::error::lock_lost || dlock::is_transient(ec)), ec.message());
            asio::steady_timer t(io);
            for (int i = 0; i < 1500 && !waiter_done; ++i) {
                t.expires_after(10ms);
                co_await t.async_wait(asio::use_awaitable);
            }
            BOOST_TEST(waiter_done);
            BOOST_TEST(waiter_token > first);
            // The stores work again on new connections.
            auto r = co_await a.async_try_acquire("terminated:after", "x", 1s, asio::use_awaitable);
            BOOST_TEST(r.acquired);
            BOOST_TEST((co_await a.async_release("terminated:after", "x", asio::use_awaitable)));
            a.close();
            b.close();
        },
        30s);
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
    dlock::postgres_store st(io.get_executor(), srv.config());
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

// A waiter withdraws (releases its queued token) while another session's release, not yet
// committed, hands it the name: the withdrawal waits on the queue row, finds it gone, and
// runs again on a new snapshot, which frees the name it was just given. Without that second
// run the name would stay with a waiter that has left until its lease ends.
BOOST_AUTO_TEST_CASE(a_withdrawal_racing_a_hand_off_frees_the_name)
{
    auto& srv = server();
    asio::io_context io;
    dlock::postgres_store st(io.get_executor(), srv.config());
    PGconn* raw = PQconnectdb(srv.url().c_str());
    BOOST_REQUIRE(PQstatus(raw) == CONNECTION_OK);
    auto exec = [&](const std::string& sql, std::vector<const char*> params = {}) {
        PGresult* r = PQexecParams(raw, sql.c_str(), static_cast<int>(params.size()), nullptr, params.data(), nullptr,
                                   nullptr, 0);
        auto status = PQresultStatus(r);
        std::string first = PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
        PQclear(r);
        BOOST_TEST((status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK), PQerrorMessage(raw));
        return first;
    };
    const std::string name = "raced";
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            bool ready = false;
            auto w = st.watch(name, "w", [&](dlock::watch_event ev, const dlock::grant_notice&) {
                ready |= ev == dlock::watch_event::ready;
            });
            BOOST_REQUIRE(co_await dlock::test::pg_eventually([&] { return ready; }));
            BOOST_TEST((co_await st.async_try_acquire(name, "h", 10s, asio::use_awaitable)).acquired);
            dlock::lease_request q{name, "w", 10s};
            q.queue = true;
            BOOST_TEST(!(co_await st.async_try_acquire(q, asio::use_awaitable)).acquired);
            // The holder's release in an open transaction: the name is W's, uncommitted.
            exec("BEGIN");
            auto release = dlock::postgres::sql::make_statements("dlock_locks").release;
            BOOST_TEST(exec(release, {name.c_str(), "h"}) == "t");
            std::optional<bool> withdrawn;
            st.async_release(name, "w", [&](boost::system::error_code ec, bool held) {
                BOOST_TEST(!ec, ec.message());
                withdrawn = held;
            });
            // The withdrawal now waits on the queue row the open transaction deleted.
            BOOST_REQUIRE(co_await dlock::test::pg_eventually([&] {
                return dlock::test::pg_count("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'dlock'"
                                             " AND wait_event_type = 'Lock'") == 1;
            }));
            BOOST_TEST(!withdrawn);
            exec("COMMIT");
            BOOST_REQUIRE(co_await dlock::test::pg_eventually([&] { return withdrawn.has_value(); }));
            BOOST_TEST(*withdrawn);  // the second run found W holding and released it
            auto s = co_await st.async_status(name, asio::use_awaitable);
            BOOST_TEST(!s.held);
            BOOST_TEST(s.queued == 0u);
            BOOST_TEST(dlock::test::pg_rows(name) == 0);
            st.unwatch(w);
            st.close();
        },
        20s);
    PQfinish(raw);
}

// Issue 29, item 4: a session holds the name's row uncommitted (a release in its
// transaction); A's acquire waits for the row; A's backend is stopped (SIGSTOP) as the row
// is freed; B acquires and releases; A's backend resumes. Whoever is granted the name, the
// tokens rise in grant order: A's token, drawn before it waited, used to be granted after
// B's later, higher one.
BOOST_AUTO_TEST_CASE(fencing_tokens_rise_in_grant_order_past_a_stalled_backend)
{
    auto& srv = server();
    asio::io_context io;
    dlock::postgres_store h(io.get_executor(), srv.config());
    dlock::postgres_store a(io.get_executor(), srv.config());
    dlock::postgres_store b(io.get_executor(), srv.config());
    PGconn* raw = PQconnectdb(srv.url().c_str());
    BOOST_REQUIRE(PQstatus(raw) == CONNECTION_OK);
    auto exec = [&](const std::string& sql, std::vector<const char*> params = {}) {
        PGresult* r = PQexecParams(raw, sql.c_str(), static_cast<int>(params.size()), nullptr, params.data(), nullptr,
                                   nullptr, 0);
        auto status = PQresultStatus(r);
        std::string first = PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
        PQclear(r);
        BOOST_TEST((status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK), PQerrorMessage(raw));
        return first;
    };
    // A's backend, stopped: resumed whatever happens, or the server could not stop.
    struct stopped_backend {
        int pid = 0;
        void resume()
        {
            if (pid > 0)
                ::kill(pid, SIGCONT);
            pid = 0;
        }
        ~stopped_backend() { resume(); }
    } stopped;
    const std::string name = "fence-order";
    auto lock_waiters = [] {
        return dlock::test::pg_count("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'dlock'"
                                     " AND wait_event_type = 'Lock'");
    };
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto first = co_await h.async_try_acquire(name, "h", 10s, asio::use_awaitable);
            BOOST_REQUIRE(first.acquired);
            // The holder's row deleted in an open transaction: held there, uncommitted.
            exec("BEGIN");
            exec("DELETE FROM dlock_locks WHERE name = $1", {name.c_str()});
            std::vector<std::pair<std::string, std::uint64_t>> grants;  // in grant order
            std::optional<dlock::acquire_result> got_a, got_b;
            a.async_try_acquire(name, "a", 10s, [&](boost::system::error_code ec, dlock::acquire_result r) {
                BOOST_TEST(!ec, ec.message());
                if (r.acquired)
                    grants.emplace_back("a", r.fencing_token);
                got_a = r;
            });
            BOOST_REQUIRE(co_await dlock::test::pg_eventually([&] { return lock_waiters() == 1; }));
            stopped.pid = static_cast<int>(dlock::test::pg_count(
                "SELECT pid FROM pg_stat_activity WHERE application_name = 'dlock' AND wait_event_type = 'Lock'"));
            BOOST_REQUIRE(::kill(stopped.pid, SIGSTOP) == 0);
            exec("COMMIT");  // the row is free; A's backend cannot take it yet
            b.async_try_acquire(name, "b", 10s, [&](boost::system::error_code ec, dlock::acquire_result r) {
                BOOST_TEST(!ec, ec.message());
                if (r.acquired)
                    grants.emplace_back("b", r.fencing_token);
                got_b = r;
            });
            // B is answered, or waits its turn behind A (two waiters: A, stopped, and B).
            BOOST_REQUIRE(co_await dlock::test::pg_eventually([&] { return got_b || lock_waiters() == 2; }));
            if (got_b && got_b->acquired)
                BOOST_TEST((co_await b.async_release(name, "b", asio::use_awaitable)));
            BOOST_TEST(!got_a);
            stopped.resume();
            BOOST_REQUIRE(co_await dlock::test::pg_eventually([&] { return got_a && got_b; }));
            BOOST_TEST(got_a->acquired);  // B, if it ran first, released
            BOOST_TEST(!grants.empty());
            for (std::size_t i = 0; i < grants.size(); ++i) {
                BOOST_TEST_MESSAGE("granted to " << grants[i].first << " with token " << grants[i].second);
                BOOST_TEST(grants[i].second > (i == 0 ? first.fencing_token : grants[i - 1].second),
                           grants[i].first << "'s token " << grants[i].second << " is not above the one before");
            }
            auto s = co_await h.async_status(name, asio::use_awaitable);
            BOOST_TEST(s.fencing_token == got_a->fencing_token);
            BOOST_TEST((co_await a.async_release(name, "a", asio::use_awaitable)));
            h.close();
            a.close();
            b.close();
        },
        30s);
    PQfinish(raw);
}

BOOST_AUTO_TEST_CASE(bad_input)
{
    auto& srv = server();
    asio::io_context io;
    dlock::postgres_store st(io.get_executor(), srv.config());
    auto wrong_pw = srv.config();
    wrong_pw.password = "wrong";
    dlock::postgres_store bad_pw(io.get_executor(), wrong_pw);
    auto no_db = srv.config();
    no_db.database = "no_such_db";
    dlock::postgres_store missing(io.get_executor(), no_db);
    auto nowhere = srv.config();
    nowhere.port = dlock::test::free_port();
    dlock::postgres_store down(io.get_executor(), nowhere);
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            // Names SQL would trip over are data: bound, never spliced.
            std::vector<std::string> names{"it's",
                                           "back\\slash",
                                           "\"quoted\"",
                                           "semi; DROP TABLE dlock_locks; --",
                                           "\xc3\xa9t\xc3\xa9",
                                           std::string(2000, 'x')};
            for (const auto& name : names) {
                auto [ec, r] = co_await st.async_try_acquire(name, "tok'en", 2s, use_tuple);
                BOOST_TEST(!ec, name.substr(0, 40) << ": " << ec.message() << " " << st.last_error_text());
                BOOST_TEST(r.acquired);
                auto s = co_await st.async_status(name, asio::use_awaitable);
                BOOST_TEST(s.holder == "tok'en");
                BOOST_TEST((co_await st.async_release(name, "tok'en", asio::use_awaitable)));
            }
            // A hand-off's notice carries name and token: odd bytes in either must survive it.
            {
                const std::string name = "hand 'off' \"x\" \\ y", token = "wait er's \\ token";
                std::vector<dlock::grant_notice> grants;
                bool ready = false;
                auto w = st.watch(name, token, [&](dlock::watch_event ev, const dlock::grant_notice& g) {
                    ready |= ev == dlock::watch_event::ready;
                    if (ev == dlock::watch_event::granted)
                        grants.push_back(g);
                });
                BOOST_TEST((co_await st.async_try_acquire(name, "holder", 5s, asio::use_awaitable)).acquired);
                BOOST_REQUIRE(co_await dlock::test::pg_eventually([&] { return ready; }));
                dlock::lease_request q{name, token, 3s};
                q.queue = true;
                BOOST_TEST(!(co_await st.async_try_acquire(q, asio::use_awaitable)).acquired);
                BOOST_TEST((co_await st.async_status(name, asio::use_awaitable)).queued == 1u);
                BOOST_TEST((co_await st.async_release(name, "holder", asio::use_awaitable)));
                BOOST_REQUIRE(co_await dlock::test::pg_eventually([&] { return !grants.empty(); }));
                BOOST_TEST(grants.front().ttl == 3000ms);
                auto s = co_await st.async_status(name, asio::use_awaitable);
                BOOST_TEST(s.holder == token);
                BOOST_TEST(s.fencing_token == grants.front().fencing_token);
                BOOST_TEST((co_await st.async_release(name, token, asio::use_awaitable)));
                st.unwatch(w);
            }
            auto [ec1, r1] = co_await st.async_try_acquire(std::string(10'000, 'y'), "t", 2s, use_tuple);
            BOOST_TEST(ec1 == dlock::error::invalid_name);
            auto [ec1t, r1t] = co_await st.async_try_acquire("ten-kb-token", std::string(10'000, 't'), 2s, use_tuple);
            BOOST_TEST(ec1t == dlock::error::invalid_name);
            // NUL cannot be in a PostgreSQL text: refused before the wire, by every operation.
            const std::string nul("a\0b", 3);
            auto [ecn1, rn1] = co_await st.async_try_acquire(nul, "t", 2s, use_tuple);
            BOOST_TEST(ecn1 == dlock::error::invalid_name);
            auto [ecn2, rn2] = co_await st.async_try_acquire("x", nul, 2s, use_tuple);
            BOOST_TEST(ecn2 == dlock::error::invalid_name);
            auto [ecn3, rn3] = co_await st.async_renew(nul, "t", 2s, use_tuple);
            BOOST_TEST(ecn3 == dlock::error::invalid_name);
            auto [ecn4, rn4] = co_await st.async_release(nul, "t", use_tuple);
            BOOST_TEST(ecn4 == dlock::error::invalid_name);
            auto [ecn5, rn5] = co_await st.async_force_release(nul, use_tuple);
            BOOST_TEST(ecn5 == dlock::error::invalid_name);
            auto [ecn6, rn6] = co_await st.async_status(std::string(10'000, 'z'), use_tuple);
            BOOST_TEST(ecn6 == dlock::error::invalid_name);
            auto [ecl, rl] = co_await st.async_try_acquire("x", "t", 31 * 24h, use_tuple);
            BOOST_TEST(ecl == dlock::error::invalid_lease);
            // Through a registry: the lock refuses the name with the same code, no retry loop.
            {
                dlock::registry reg(st, {.lease = 2s});
                auto [ecr, gr] = co_await reg.obtain(nul).acquire(use_tuple);
                BOOST_TEST(ecr == dlock::error::invalid_name, ecr.message());
            }
            auto [ec2, r2] = co_await st.async_try_acquire("bad\xff", "t", 2s, use_tuple);
            BOOST_TEST(ec2 == dlock::error::invalid_name, ec2.message() << " " << st.last_error_text());
            auto [ec3, r3] = co_await st.async_try_acquire("x", "t", 0ms, use_tuple);
            BOOST_TEST(ec3 == dlock::error::invalid_lease);
            auto [ec4] = co_await bad_pw.async_connect(use_tuple);
            BOOST_TEST(ec4 == dlock::error::auth_failed, ec4.message() << " " << bad_pw.last_error_text());
            BOOST_TEST(!dlock::is_transient(ec4));
            BOOST_TEST(bad_pw.last_error_text().find("password authentication failed") != std::string::npos,
                       bad_pw.last_error_text());
            BOOST_TEST(bad_pw.last_error_text().find("wrong") == std::string::npos);  // the password is not echoed
            {
                // A lock on a wrong password fails at once (permanent), it does not retry.
                dlock::registry reg(bad_pw, {.lease = 2s});
                auto [ecr, gr] = co_await reg.obtain("pw").acquire(use_tuple);
                BOOST_TEST(ecr == dlock::error::auth_failed, ecr.message());
            }
            auto [ec5] = co_await missing.async_connect(use_tuple);
            BOOST_TEST(ec5 == dlock::error::handshake_failed, ec5.message());
            BOOST_TEST(missing.last_error_text().find("does not exist") != std::string::npos,
                       missing.last_error_text());
            auto [ec6] = co_await down.async_connect(use_tuple);
            BOOST_TEST(ec6 == dlock::error::connect_failed, ec6.message() << " " << down.last_error_text());
            BOOST_TEST(dlock::is_transient(ec6));
            // A registry on a store that is down fails (transient errors retried up to its limit) without hanging.
            st.close();
            bad_pw.close();
            missing.close();
            down.close();
        },
        30s);
}

BOOST_AUTO_TEST_SUITE_END()
