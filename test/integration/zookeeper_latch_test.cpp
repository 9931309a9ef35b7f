// SPDX-License-Identifier: BSL-1.0
// Count-down latches on a real ZooKeeper server, in a layout of ours (src/zookeeper/latch_node.hpp),
// with separate processes (integration/latch_worker.cpp on a zk:// URL): a waiter wakes
// exactly at the last count-down, concurrent members each count once, a count mismatch is
// refused, an expired latch starts afresh and its TTL node is deleted by the server (or, where
// the server refuses TTL nodes, by the next read), a latch and a lock refuse each other's name,
// and a cancelled wait ends cleanly. One server for the suite, with TTL nodes allowed and
// containers checked every 100 ms.
#include <dlock/dlock.hpp>

#include "common/child.hpp"
#include "integration/consensus/zookeeper_family.hpp"
#include "integration/latch_scenarios.hpp"
#include "integration/lock_test_util.hpp"  // eventually
#include "integration/support.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>


using namespace dlock::test;  // its asio alias and chrono literals too

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

std::unique_ptr<zk_ensemble> shared;
struct one_server {
    one_server()
    {
        shared = std::make_unique<zk_ensemble>(
            1, std::vector<std::string>{"zookeeper.extendedTypesEnabled=true", "znode.container.checkIntervalMs=100"});
    }
    ~one_server() { shared.reset(); }
};

std::string url()
{
    return shared->url("?session_timeout=4s");
}

// The latch as the store keeps it, read by a store of its own at `where`.
dlock::test::latch::state_fn state_in(const std::string& where)
{
    return [where](const std::string& name) {
        return dlock::test::latch::state_from<dlock::zookeeper_store>(zookeeper_family::config_of(where), name);
    };
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zookeeper_latch, *boost::unit_test::fixture<one_server>())

BOOST_AUTO_TEST_CASE(a_waiter_process_wakes_exactly_at_the_last_count_down)
{
    dlock::test::latch::a_waiter_wakes_exactly_at_the_last_count_down(url(), state_in(url()));
}

BOOST_AUTO_TEST_CASE(concurrent_processes_each_count_once)
{
    dlock::test::latch::concurrent_processes_each_count_once(url(), state_in(url()));
}

BOOST_AUTO_TEST_CASE(a_count_mismatch_across_processes_is_refused)
{
    dlock::test::latch::a_count_mismatch_across_processes_is_refused(url(), state_in(url()));
}

// A latch expires `ttl` after its latest count-down, on the server's clock: it reads as none,
// the next count-down starts afresh with any count, and the server deletes its TTL node and
// the name's container (the node count goes back). A lock's name refuses a latch and the
// other way round. Bad input is refused before anything is sent.
BOOST_AUTO_TEST_CASE(an_expired_latch_starts_afresh_and_its_nodes_go)
{
    asio::io_context io;
    dlock::zookeeper_store st(io.get_executor(), zookeeper_family::config_of(url()));
    dlock::registry reg(st, {.lease = 5s});
    auto& ops = *st.latches();
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            const std::string old = "old", gone = "gone", a = "a", b = "b";
            // The store's clock node and root exist after a first latch: the baseline.
            BOOST_TEST(co_await ops.async_count_down(old, a, 2, 60s, asio::use_awaitable) == 1u);
            const long before = shared->node_count(0);
            BOOST_TEST(co_await ops.async_count_down(gone, a, 2, 500ms, asio::use_awaitable) == 1u);
            BOOST_TEST(shared->node_count(0) == before + 2, "the name's path and its latch node");
            auto s = co_await ops.async_latch_state(gone, asio::use_awaitable);
            BOOST_TEST(s.count == 2u);
            BOOST_TEST(s.remaining == 1u);
            // Deleted by the server (a TTL node, then the empty container), nobody reading it.
            BOOST_TEST(co_await eventually([&] { return shared->node_count(0) == before; }, 20s),
                       "nodes: " << shared->node_count(0) << ", before: " << before);
            BOOST_TEST(state_in(url())(gone).count == 0u);
            // Starts afresh with another count.
            BOOST_TEST(co_await ops.async_count_down(gone, b, 3, 60s, asio::use_awaitable) == 2u);
            // Each count-down extends the latch by its ttl, the first count-down's: 4 s after a
            // first of 3 s, with another (of 1 s, not taken) at 2 s, it is alive.
            const std::string ext = "ext";
            BOOST_TEST(co_await ops.async_count_down(ext, a, 3, 3s, asio::use_awaitable) == 2u);
            asio::steady_timer t(io, 2s);
            co_await t.async_wait(asio::use_awaitable);
            BOOST_TEST(co_await ops.async_count_down(ext, b, 3, 1s, asio::use_awaitable) == 1u);
            t.expires_after(2s);
            co_await t.async_wait(asio::use_awaitable);
            BOOST_TEST((co_await ops.async_latch_state(ext, asio::use_awaitable)).remaining == 1u);
            // A latch's name refuses a mutex, and a mutex's name a latch, naming what it is
            // (the registry puts "dlock:" before its names).
            co_await dlock::test::latch::kinds_do_not_mix_and_bad_input_is_refused(reg, st, ops);
            auto [e5, g5] = co_await reg.obtain_semaphore("latched", 2).try_acquire(use_tuple);
            BOOST_TEST(e5 == dlock::error::kind_mismatch, e5.message());
            co_await reg.async_drain();
            st.close();
        },
        60s);
}

// A server that refuses TTL nodes (extendedTypesEnabled off, ZooKeeper's default): the latch
// is a plain node, it still expires on the server's clock, and the read that finds it
// expired deletes it.
BOOST_AUTO_TEST_CASE(without_ttl_nodes_an_expired_latch_is_deleted_by_its_next_read)
{
    zk_ensemble plain(1);
    const auto where = plain.url("?session_timeout=4s");
    asio::io_context io;
    dlock::zookeeper_store st(io.get_executor(), zookeeper_family::config_of(where));
    auto& ops = *st.latches();
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            const std::string first = "first", name = "plain", a = "a";
            BOOST_TEST(co_await ops.async_count_down(first, a, 2, 60s, asio::use_awaitable) == 1u);
            const long before = plain.node_count(0);
            BOOST_TEST(co_await ops.async_count_down(name, a, 2, 300ms, asio::use_awaitable) == 1u);
            BOOST_TEST(plain.node_count(0) == before + 2);
            BOOST_TEST(co_await eventually([&] { return state_in(where)(name).count == 0; }, 20s));
            // Its node went with that read; the container follows when the server reaps it (60 s).
            BOOST_TEST(plain.node_count(0) <= before + 1);

            // An expired latch nobody read: the next count-down deletes it and starts afresh.
            const std::string again = "again", b = "b";
            BOOST_TEST(co_await ops.async_count_down(again, a, 2, 300ms, asio::use_awaitable) == 1u);
            asio::steady_timer t(io, 600ms);  // its expiry, on the server's clock
            co_await t.async_wait(asio::use_awaitable);
            BOOST_TEST(co_await ops.async_count_down(again, b, 3, 60s, asio::use_awaitable) == 2u);

            // An expired latch nobody read keeps no mutex out: alive it refuses one, expired
            // the mutex's round deletes it.
            dlock::registry reg(st, {.lease = 5s});
            const std::string held = "dlock:held";
            BOOST_TEST(co_await ops.async_count_down(held, a, 2, 300ms, asio::use_awaitable) == 1u);
            auto [e0, g0] = co_await reg.obtain("held").try_acquire(use_tuple);
            BOOST_TEST(e0 == dlock::error::kind_mismatch, e0.message());
            t.expires_after(600ms);
            co_await t.async_wait(asio::use_awaitable);
            auto [e1, g1] = co_await reg.obtain("held").try_acquire(use_tuple);
            BOOST_TEST(!e1, e1.message());
            BOOST_TEST(g1.owns_lock());
            co_await g1.release();
            co_await reg.async_drain();
            st.close();
        },
        40s);
}

// A wait cancelled (or timed out) is gone: the latch completes later without it, and a new
// wait then returns at once.
BOOST_AUTO_TEST_CASE(a_cancelled_or_timed_out_wait_ends_cleanly)
{
    asio::io_context io;
    dlock::zookeeper_store st(io.get_executor(), zookeeper_family::config_of(url()));
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
