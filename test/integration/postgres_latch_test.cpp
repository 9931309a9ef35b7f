// SPDX-License-Identifier: BSL-1.0
// Count-down latches on a throwaway PostgreSQL, with real worker processes
// (integration/latch_worker.cpp on a postgresql:// URL): a waiter wakes exactly at the last
// count-down, concurrent processes each count once, a count mismatch is refused, an expired
// latch starts afresh and old ones are swept, a cancelled wait leaves no watch.
#include <dlock/dlock.hpp>

#include "common/child.hpp"
#include "integration/latch_scenarios.hpp"
#include "integration/sql/postgres_family.hpp"
#include "integration/sql/scenarios.hpp"  // use_tuple
#include "integration/support.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>


using namespace dlock::test;  // its asio alias and chrono literals too
using dlock::test::sql::use_tuple;

namespace {

// Backends of the stores that LISTEN (a latch waiter's watch is in place once its
// listener has run LISTEN).
long listeners()
{
    return pg_count("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'dlock'"
                    " AND query LIKE 'LISTEN%'");
}

bool listeners_reach(long n)
{
    return pg_reaches(listeners, n);
}

// A waiter process's watch is in place once one more backend LISTENs than now.
dlock::test::latch::watching_fn watching()
{
    return [before = listeners()](const std::string&) { return listeners_reach(before + 1); };
}

dlock::latch_state state_of(const std::string& name)
{
    return dlock::test::latch::state_from<dlock::postgres_store>(pg_server().config(), name);
}

long members_of(const std::string& name)
{
    return pg_count("SELECT count(*) FROM dlock_locks_latch_member WHERE name = " + postgres_family::literal(name));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(postgres_latch)

BOOST_AUTO_TEST_CASE(a_waiter_process_wakes_exactly_at_the_last_count_down)
{
    dlock::test::latch::a_waiter_wakes_exactly_at_the_last_count_down(pg_server().url(), state_of, watching());
    BOOST_TEST(members_of("dlock:job") == 4);
}

BOOST_AUTO_TEST_CASE(concurrent_processes_each_count_once)
{
    dlock::test::latch::concurrent_processes_each_count_once(pg_server().url(), state_of, watching());
    BOOST_TEST(members_of("dlock:many") == 6);
    // The latch's expiry on the server's clock: the default, one day.
    BOOST_TEST(pg_count("SELECT count(*) FROM dlock_locks_latch WHERE name = 'dlock:many'"
                        " AND expires_at > clock_timestamp() + interval '23 hours'"
                        " AND expires_at <= clock_timestamp() + interval '24 hours'") == 1);
}

BOOST_AUTO_TEST_CASE(a_count_mismatch_across_processes_is_refused)
{
    dlock::test::latch::a_count_mismatch_across_processes_is_refused(pg_server().url(), state_of);
    BOOST_TEST(members_of("dlock:mm") == 1);
}

// An expired latch is gone for the next count-down (a new round with any count), and a
// count-down sweeps other names' expired latches with their members.
BOOST_AUTO_TEST_CASE(an_expired_latch_starts_afresh_and_old_ones_are_swept)
{
    asio::io_context io;
    dlock::postgres_store st(io.get_executor(), pg_server().config());
    auto& ops = *st.latches();
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            const std::string old = "old", stale = "stale", a = "a", b = "b";
            BOOST_TEST(co_await ops.async_count_down(old, a, 2, 60s, asio::use_awaitable) == 1u);
            BOOST_TEST(co_await ops.async_count_down(stale, a, 5, 60s, asio::use_awaitable) == 4u);
            auto s = co_await ops.async_latch_state(old, asio::use_awaitable);
            BOOST_TEST(s.count == 2u);
            BOOST_TEST(s.remaining == 1u);
            pg_server().psql("UPDATE dlock_locks_latch SET expires_at = clock_timestamp() - interval '1 second'");
            s = co_await ops.async_latch_state(old, asio::use_awaitable);
            BOOST_TEST(s.count == 0u);  // expired: no such latch
            BOOST_TEST(co_await ops.async_count_down(old, b, 3, 60s, asio::use_awaitable) == 2u);
            BOOST_TEST(members_of(old) == 1);  // a's count went with the old round
            BOOST_TEST(pg_count("SELECT count(*) FROM dlock_locks_latch WHERE name = 'stale'") == 0);
            BOOST_TEST(members_of(stale) == 0);
            // Bad input is refused before anything is sent.
            const std::string empty, nul("x\0y", 3);
            auto [e1, r1] = co_await ops.async_count_down(old, empty, 3, 60s, use_tuple);
            BOOST_TEST(e1 == dlock::error::invalid_option);
            auto [e2, r2] = co_await ops.async_count_down(old, b, 0, 60s, use_tuple);
            BOOST_TEST(e2 == dlock::error::invalid_option);
            auto [e3, r3] = co_await ops.async_count_down(old, b, 3, 0s, use_tuple);
            BOOST_TEST(e3 == dlock::error::invalid_lease);
            auto [e4, r4] = co_await ops.async_count_down(nul, b, 3, 60s, use_tuple);
            BOOST_TEST(e4 == dlock::error::invalid_name);
            st.close();
        },
        20s);
}

// A wait cancelled (or timed out) is gone: the latch completes later without it, and a
// new wait then returns at once.
BOOST_AUTO_TEST_CASE(a_cancelled_or_timed_out_wait_ends_cleanly)
{
    asio::io_context io;
    dlock::postgres_store st(io.get_executor(), pg_server().config());
    dlock::registry reg(st);
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            co_await dlock::test::latch::a_cancelled_or_timed_out_wait_ends_cleanly(reg);
            st.close();
        },
        20s);
}

BOOST_AUTO_TEST_SUITE_END()
