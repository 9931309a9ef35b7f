// SPDX-License-Identifier: BSL-1.0
// postgres_store against a throwaway PostgreSQL 15: the SQL scenarios (sql/scenarios.hpp) and
// what only PostgreSQL has: a withdrawal racing a hand-off, a stalled backend's token, a
// hand-off notice's odd bytes, names PostgreSQL's text cannot hold.
#include "integration/sql/pg_session.hpp"
#include "integration/sql/postgres_family.hpp"
#include "integration/sql/scenarios.hpp"
#include "postgres/sql.hpp"

#include <signal.h>

using namespace dlock::test;  // its asio alias and chrono literals too
using dlock::test::sql::use_tuple;

BOOST_AUTO_TEST_SUITE(postgres)

// The SQL scenarios; the connections are cut by pg_terminate_backend.
DLOCK_SQL_STORE_CASES(postgres_family, terminated_connections)

// A waiter withdraws (releases its queued token) while another session's release, not yet
// committed, hands it the name: the withdrawal waits on the queue row, finds it gone, and
// runs again on a new snapshot, which frees the name it was just given. Without that second
// run the name would stay with a waiter that has left until its lease ends.
BOOST_AUTO_TEST_CASE(a_withdrawal_racing_a_hand_off_frees_the_name)
{
    asio::io_context io;
    dlock::postgres_store st(io.get_executor(), pg_server().config());
    pg_session session;
    const std::string name = "raced";
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            bool ready = false;
            auto w = st.watch(name, "w", [&](dlock::watch_event ev, const dlock::grant_notice&) {
                ready |= ev == dlock::watch_event::ready;
            });
            BOOST_REQUIRE(co_await eventually([&] { return ready; }));
            BOOST_TEST((co_await st.async_try_acquire(name, "h", 10s, asio::use_awaitable)).acquired);
            dlock::lease_request q{name, "w", 10s};
            q.queue = true;
            BOOST_TEST(!(co_await st.async_try_acquire(q, asio::use_awaitable)).acquired);
            // The holder's release in an open transaction: the name is W's, uncommitted.
            session.exec("BEGIN");
            auto release = dlock::postgres::sql::make_statements("dlock_locks").release;
            BOOST_TEST(session.exec(release, {name.c_str(), "h"}) == "t");
            std::optional<bool> withdrawn;
            st.async_release(name, "w", [&](boost::system::error_code ec, bool held) {
                BOOST_TEST(!ec, ec.message());
                withdrawn = held;
            });
            // The withdrawal now waits on the queue row the open transaction deleted.
            BOOST_REQUIRE(co_await eventually([&] { return pg_lock_waiters() == 1; }));
            BOOST_TEST(!withdrawn);
            session.exec("COMMIT");
            BOOST_REQUIRE(co_await eventually([&] { return withdrawn.has_value(); }));
            BOOST_TEST(*withdrawn);  // the second run found W holding and released it
            auto s = co_await st.async_status(name, asio::use_awaitable);
            BOOST_TEST(!s.held);
            BOOST_TEST(s.queued == 0u);
            BOOST_TEST(dlock::test::pg_rows(name) == 0);
            st.unwatch(w);
            st.close();
        },
        20s);
}

// Issue 29, item 4: a session holds the name's row uncommitted (a release in its
// transaction); A's acquire waits for the row; A's backend is stopped (SIGSTOP) as the row
// is freed; B acquires and releases; A's backend resumes. Whoever is granted the name, the
// tokens rise in grant order: A's token, drawn before it waited, used to be granted after
// B's later, higher one.
BOOST_AUTO_TEST_CASE(fencing_tokens_rise_in_grant_order_past_a_stalled_backend)
{
    asio::io_context io;
    dlock::postgres_store h(io.get_executor(), pg_server().config());
    dlock::postgres_store a(io.get_executor(), pg_server().config());
    dlock::postgres_store b(io.get_executor(), pg_server().config());
    pg_session session;
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
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto first = co_await h.async_try_acquire(name, "h", 10s, asio::use_awaitable);
            BOOST_REQUIRE(first.acquired);
            // The holder's row deleted in an open transaction: held there, uncommitted.
            session.exec("BEGIN");
            session.exec("DELETE FROM dlock_locks WHERE name = $1", {name.c_str()});
            std::vector<std::pair<std::string, std::uint64_t>> grants;  // in grant order
            std::optional<dlock::acquire_result> got_a, got_b;
            auto record = [&](const char* who, std::optional<dlock::acquire_result>& got) {
                return [&grants, who, into = &got](boost::system::error_code ec, dlock::acquire_result r) {
                    BOOST_TEST(!ec, ec.message());
                    if (r.acquired)
                        grants.emplace_back(who, r.fencing_token);
                    *into = r;
                };
            };
            a.async_try_acquire(name, "a", 10s, record("a", got_a));
            BOOST_REQUIRE(co_await eventually([&] { return pg_lock_waiters() == 1; }));
            stopped.pid = static_cast<int>(dlock::test::pg_count(
                "SELECT pid FROM pg_stat_activity WHERE application_name = 'dlock' AND wait_event_type = 'Lock'"));
            BOOST_REQUIRE(::kill(stopped.pid, SIGSTOP) == 0);
            session.exec("COMMIT");  // the row is free; A's backend cannot take it yet
            b.async_try_acquire(name, "b", 10s, record("b", got_b));
            // B is answered, or waits its turn behind A (two waiters: A, stopped, and B).
            BOOST_REQUIRE(co_await eventually([&] { return got_b || pg_lock_waiters() == 2; }));
            if (got_b && got_b->acquired)
                BOOST_TEST((co_await b.async_release(name, "b", asio::use_awaitable)));
            BOOST_TEST(!got_a);
            stopped.resume();
            BOOST_REQUIRE(co_await eventually([&] { return got_a && got_b; }));
            BOOST_TEST(got_a->acquired);  // B, if it ran first, released
            BOOST_TEST(!grants.empty());
            dlock::test::check_grant_order(grants, first.fencing_token);
            auto s = co_await h.async_status(name, asio::use_awaitable);
            BOOST_TEST(s.fencing_token == got_a->fencing_token);
            BOOST_TEST((co_await a.async_release(name, "a", asio::use_awaitable)));
            h.close();
            a.close();
            b.close();
        },
        30s);
}

// A hand-off's notice carries name and token: odd bytes in either must survive it.
BOOST_AUTO_TEST_CASE(odd_bytes_survive_a_hand_off_notice)
{
    sql::with_store<postgres_family>([](dlock::postgres_store& st) -> asio::awaitable<void> {
        const std::string name = "hand 'off' \"x\" \\ y", token = "wait er's \\ token";
        std::vector<dlock::grant_notice> grants;
        bool ready = false;
        auto w = st.watch(name, token, [&](dlock::watch_event ev, const dlock::grant_notice& g) {
            ready |= ev == dlock::watch_event::ready;
            if (ev == dlock::watch_event::granted)
                grants.push_back(g);
        });
        BOOST_TEST((co_await st.async_try_acquire(name, "holder", 5s, asio::use_awaitable)).acquired);
        BOOST_REQUIRE(co_await eventually([&] { return ready; }));
        dlock::lease_request q{name, token, 3s};
        q.queue = true;
        BOOST_TEST(!(co_await st.async_try_acquire(q, asio::use_awaitable)).acquired);
        BOOST_TEST((co_await st.async_status(name, asio::use_awaitable)).queued == 1u);
        BOOST_TEST((co_await st.async_release(name, "holder", asio::use_awaitable)));
        BOOST_REQUIRE(co_await eventually([&] { return !grants.empty(); }));
        BOOST_TEST(grants.front().ttl == 3000ms);
        auto s = co_await st.async_status(name, asio::use_awaitable);
        BOOST_TEST(s.holder == token);
        BOOST_TEST(s.fencing_token == grants.front().fencing_token);
        BOOST_TEST((co_await st.async_release(name, token, asio::use_awaitable)));
        st.unwatch(w);
    });
}

// NUL cannot be in a PostgreSQL text, nor invalid UTF-8: refused before the wire, by every
// operation, and by a lock with the same code (no retry loop).
BOOST_AUTO_TEST_CASE(nul_and_invalid_utf8_are_refused)
{
    sql::with_store<postgres_family>([](dlock::postgres_store& st) -> asio::awaitable<void> {
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
        {
            dlock::registry reg(st, {.lease = 2s});
            auto [ecr, gr] = co_await reg.obtain(nul).acquire(use_tuple);
            BOOST_TEST(ecr == dlock::error::invalid_name, ecr.message());
        }
        auto [ec2, r2] = co_await st.async_try_acquire("bad\xff", "t", 2s, use_tuple);
        BOOST_TEST(ec2 == dlock::error::invalid_name, ec2.message() << " " << st.last_error_text());
    });
}

BOOST_AUTO_TEST_SUITE_END()
