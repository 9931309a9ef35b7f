// SPDX-License-Identifier: BSL-1.0
// Count-down latches on a real etcd cluster, in a layout of ours (src/etcd/latch_codec.hpp),
// with separate processes (integration/latch_worker.cpp on an etcd:// URL): a waiter wakes
// exactly at the last count-down, concurrent members each count once, a count mismatch is
// refused, an expired latch is gone with every key and starts afresh, a latch and a lock
// refuse each other's name, and a cancelled wait ends cleanly. One cluster for the suite.
#include <dlock/dlock.hpp>

#include "common/child.hpp"
#include "integration/consensus/etcd_family.hpp"
#include "integration/latch_scenarios.hpp"
#include "integration/lock_test_util.hpp"  // eventually
#include "integration/support.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>


using namespace dlock::test;  // its asio alias and chrono literals too

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

std::unique_ptr<etcd_cluster> shared;
struct one_cluster {
    one_cluster() { shared = std::make_unique<etcd_cluster>(); }
    ~one_cluster() { shared.reset(); }
};

// The latch as the store keeps it, read by a store of its own.
dlock::latch_state state_of(const std::string& name)
{
    return dlock::test::latch::state_from<dlock::etcd_store>(etcd_family::config_of(shared->url()), name);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(etcd_latch, *boost::unit_test::fixture<one_cluster>())

BOOST_AUTO_TEST_CASE(a_waiter_process_wakes_exactly_at_the_last_count_down)
{
    dlock::test::latch::a_waiter_wakes_exactly_at_the_last_count_down(shared->url(), state_of);
}

BOOST_AUTO_TEST_CASE(concurrent_processes_each_count_once)
{
    dlock::test::latch::concurrent_processes_each_count_once(shared->url(), state_of);
}

BOOST_AUTO_TEST_CASE(a_count_mismatch_across_processes_is_refused)
{
    dlock::test::latch::a_count_mismatch_across_processes_is_refused(shared->url(), state_of);
}

// A latch's keys live on its own lease: when its TTL runs out etcd deletes them all, and the
// next count-down starts a new round with any count. A lock's name refuses a latch and the
// other way round. Bad input is refused before anything is sent.
BOOST_AUTO_TEST_CASE(an_expired_latch_is_gone_and_kinds_do_not_mix)
{
    asio::io_context io;
    dlock::etcd_store st(io.get_executor(), etcd_family::config_of(shared->url()));
    dlock::registry reg(st, {.lease = 5s});
    auto& ops = *st.latches();
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            const std::string old = "old", a = "a", b = "b";
            BOOST_TEST(co_await ops.async_count_down(old, a, 2, 2s, asio::use_awaitable) == 1u);
            auto s = co_await ops.async_latch_state(old, asio::use_awaitable);
            BOOST_TEST(s.count == 2u);
            BOOST_TEST(s.remaining == 1u);
            // Gone with its lease (etcd's clock, a few seconds): no such latch, no key left.
            BOOST_TEST(co_await eventually([&] { return state_of(old).count == 0; }, 20s));
            auto left = co_await st.async_status(old, asio::use_awaitable);
            BOOST_TEST(!left.held, "a key is left: " << left.key);
            BOOST_TEST(co_await ops.async_count_down(old, b, 3, 60s, asio::use_awaitable) == 2u);
            // A latch's name refuses a mutex, and a mutex's name a latch, naming what it is
            // (the registry puts "dlock:" before its names).
            co_await dlock::test::latch::kinds_do_not_mix_and_bad_input_is_refused(reg, st, ops);
            co_await reg.async_drain();
            st.close();
        },
        60s);
}

// A wait cancelled (or timed out) is gone: the latch completes later without it, and a new
// wait then returns at once.
BOOST_AUTO_TEST_CASE(a_cancelled_or_timed_out_wait_ends_cleanly)
{
    asio::io_context io;
    dlock::etcd_store st(io.get_executor(), etcd_family::config_of(shared->url()));
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
