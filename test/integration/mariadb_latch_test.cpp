// SPDX-License-Identifier: BSL-1.0
// Count-down latches on a throwaway MariaDB, with real worker processes
// (integration/latch_worker.cpp on a mariadb:// URL): a waiter wakes exactly at the last
// count-down (the doorbell), concurrent processes each count once, a count mismatch is
// refused, an expired latch starts afresh and old ones are swept, a cancelled wait leaves no
// watch and no enrolment.
#include <dlock/dlock.hpp>

#include "common/child.hpp"
#include "integration/latch_scenarios.hpp"
#include "integration/sql/mariadb_family.hpp"
#include "integration/sql/scenarios.hpp"  // use_tuple
#include "integration/support.hpp"

using namespace dlock::test;  // its asio alias and chrono literals too
using dlock::test::sql::use_tuple;

namespace {

mariadb_server& srv()
{
    return mariadb_family::server();
}

// A waiter process's watch is in place once its sleeper is enrolled for the name.
dlock::test::latch::watching_fn watching()
{
    return
        [](const std::string& name) { return mariadb_reaches([&] { return mariadb_enrolled("dlock:" + name); }, 1); };
}

dlock::latch_state state_of(const std::string& name)
{
    return dlock::test::latch::state_from<dlock::mariadb_store>(srv().config(), name);
}

long members_of(const std::string& name)
{
    return mariadb_family::count("SELECT COUNT(*) FROM dlock.dlock_locks_latch_member WHERE name = " +
                                 mariadb_family::literal(name));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(mariadb_latch)

BOOST_AUTO_TEST_CASE(a_waiter_process_wakes_exactly_at_the_last_count_down)
{
    dlock::test::latch::a_waiter_wakes_exactly_at_the_last_count_down(srv().url(), state_of, watching());
    BOOST_TEST(members_of("dlock:job") == 4);
}

BOOST_AUTO_TEST_CASE(concurrent_processes_each_count_once)
{
    dlock::test::latch::concurrent_processes_each_count_once(srv().url(), state_of, watching());
    BOOST_TEST(members_of("dlock:many") == 6);
    // The latch's expiry on the server's clock: the default, one day.
    BOOST_TEST(mariadb_family::count("SELECT COUNT(*) FROM dlock.dlock_locks_latch WHERE name = 'dlock:many'"
                                     " AND expires_at > UTC_TIMESTAMP(6) + INTERVAL 23 HOUR"
                                     " AND expires_at <= UTC_TIMESTAMP(6) + INTERVAL 24 HOUR") == 1);
}

BOOST_AUTO_TEST_CASE(a_count_mismatch_across_processes_is_refused)
{
    dlock::test::latch::a_count_mismatch_across_processes_is_refused(srv().url(), state_of);
    BOOST_TEST(members_of("dlock:mm") == 1);
}

// An expired latch is gone for the next count-down (a new round with any count), and a
// count-down sweeps other names' expired latches with their members.
BOOST_AUTO_TEST_CASE(an_expired_latch_starts_afresh_and_old_ones_are_swept)
{
    asio::io_context io;
    dlock::mariadb_store st(io.get_executor(), srv().config());
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
            srv().sql("UPDATE dlock.dlock_locks_latch SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND");
            s = co_await ops.async_latch_state(old, asio::use_awaitable);
            BOOST_TEST(s.count == 0u);  // expired: no such latch
            BOOST_TEST(co_await ops.async_count_down(old, b, 3, 60s, asio::use_awaitable) == 2u);
            BOOST_TEST(members_of(old) == 1);  // a's count went with the old round
            BOOST_TEST(mariadb_family::count("SELECT COUNT(*) FROM dlock.dlock_locks_latch WHERE name = 'stale'") == 0);
            BOOST_TEST(members_of(stale) == 0);
            // Bad input is refused before anything is sent.
            const std::string empty, long_name(2001, 'n');
            auto [e1, r1] = co_await ops.async_count_down(old, empty, 3, 60s, use_tuple);
            BOOST_TEST(e1 == dlock::error::invalid_option);
            auto [e2, r2] = co_await ops.async_count_down(old, b, 0, 60s, use_tuple);
            BOOST_TEST(e2 == dlock::error::invalid_option);
            auto [e3, r3] = co_await ops.async_count_down(old, b, 3, 0s, use_tuple);
            BOOST_TEST(e3 == dlock::error::invalid_lease);
            auto [e4, r4] = co_await ops.async_count_down(long_name, b, 3, 60s, use_tuple);
            BOOST_TEST(e4 == dlock::error::invalid_name);
            st.close();
        },
        20s);
}

// A wait cancelled (or timed out) is gone: the latch completes later without it, and a
// new wait then returns at once; no enrolment is left at the doorbell.
BOOST_AUTO_TEST_CASE(a_cancelled_or_timed_out_wait_ends_cleanly)
{
    asio::io_context io;
    dlock::mariadb_store st(io.get_executor(), srv().config());
    dlock::registry reg(st);
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            co_await dlock::test::latch::a_cancelled_or_timed_out_wait_ends_cleanly(reg);
            BOOST_TEST(co_await eventually([] {
                return mariadb_family::count("SELECT COUNT(*) FROM"
                                             " dlock.dlock_locks_bell") == 0;
            }));
            st.close();
        },
        20s);
}

BOOST_AUTO_TEST_SUITE_END()
