// SPDX-License-Identifier: BSL-1.0
// cluster_store against a real three-master Redis Cluster the tests start: the store
// contract, keys spread over every master, a slot migration followed through ASK, TRYAGAIN
// and MOVED (with the subscription moving along), lock_worker processes counting under
// the lock, and latches and elections across two stores.
#include <dlock/dlock.hpp>

#include "common/child.hpp"
#include "common/redis_cluster.hpp"
#include "common/scratch_dir.hpp"
#include "integration/lock_test_util.hpp"
#include "integration/mutual_exclusion.hpp"
#include "integration/store_contract.hpp"
#include "integration/support.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using boost::system::error_code;
using dlock::test::notifier;
using dlock::test::redis_cluster;
using dlock::test::run_test;
using dlock::test::task_group;

namespace {

constexpr auto tuple = asio::as_tuple(asio::use_awaitable);

long long to_ll(const std::string& s)
{
    try {
        return std::stoll(s);
    } catch (const std::exception&) {
        return -1;
    }
}

// A free function, not a capturing lambda: the coroutine frame must not refer to a lambda
// object that dies at the end of the spawning expression.
asio::awaitable<void> acquire_one(dlock::cluster_store& st, std::string name, int& acquired)
{
    auto r = co_await st.async_try_acquire(name, "me", 30s, asio::use_awaitable);
    acquired += r.acquired ? 1 : 0;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cluster)

BOOST_AUTO_TEST_CASE(store_contract)
{
    redis_cluster c;
    asio::io_context io;
    // One seed is enough: the rest is discovered.
    dlock::cluster_store st(io.get_executor(), c.node(1).config());
    dlock::cluster_store other(io.get_executor(), c.node(2).config());  // another client, for the kinds
    auto keys_of = [&c](const std::string& name) {
        std::vector<std::string> out;
        for (std::size_t i = 0; i < c.size(); ++i) {
            auto k = c.node(i).cli({"EVAL", "return table.concat(redis.call('KEYS', ARGV[1]), ' ')", "0", "*:" + name});
            if (!k.empty())
                out.push_back(k);
        }
        return out;
    };
    dlock::test::run_contract(
        io, st,
        [&] {
            st.close();
            other.close();
        },
        &other, keys_of);
    BOOST_TEST(st.masters().size() == 3u);
    BOOST_TEST(st.stats().refreshes >= 1u);
    BOOST_TEST(st.stats().redirect_failures == 0u);
    // The same key names as a single-node store, all in the name's slot.
    dlock::redis_store single(io.get_executor(), c.node(0).config());
    BOOST_TEST(st.lock_key("a") == single.lock_key("a"));
    BOOST_TEST(st.fence_key("a") == single.fence_key("a"));
    BOOST_TEST(st.channel("a") == single.channel("a"));
    BOOST_TEST(dlock::key_slot(st.lock_key("a")) == dlock::key_slot(st.channel("a")));

    // Destroyed with operations in flight (some waiting for the topology, some on the
    // wire): each completes once, with an error, after the store is gone; no watcher runs.
    asio::io_context io2;
    auto gone = std::make_unique<dlock::cluster_store>(io2.get_executor(), c.seeds());
    int completed = 0, failed = 0, watched = 0;
    gone->watch("w", [&](dlock::watch_event) { ++watched; });
    for (int i = 0; i < 20; ++i)
        gone->async_try_acquire("d" + std::to_string(i), "t", 5s, [&](error_code ec, dlock::acquire_result) {
            ++completed;
            failed += ec ? 1 : 0;
        });
    io2.poll();  // the topology read is on its way
    BOOST_TEST(completed == 0);
    gone.reset();
    io2.run_for(5s);
    BOOST_TEST(completed == 20);
    BOOST_TEST(failed == 20);
    BOOST_TEST(watched == 0);
}

BOOST_AUTO_TEST_CASE(names_spread_over_every_master)
{
    redis_cluster c;
    asio::io_context io;
    dlock::cluster_store st(io.get_executor(), c.seeds(), "spread");
    constexpr int names = 300;
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            // Concurrently: the first ones wait for the topology read, the rest pipeline.
            dlock::test::task_group g(io.get_executor());
            int acquired = 0;
            for (int i = 0; i < names; ++i)
                g.spawn(acquire_one(st, "n" + std::to_string(i), acquired));
            co_await g.join(20s);
            BOOST_TEST(acquired == names);
            // Every master holds some of the locks (plus its fencing counters), and each lock
            // key is where the store's map says its slot lives.
            std::map<std::string, int> per_master;
            for (int i = 0; i < names; i += 7) {
                auto name = "n" + std::to_string(i);
                auto at = st.master_of(name);
                ++per_master[at];
                for (std::size_t n = 0; n < c.size(); ++n)
                    if (c.address(n) == at)
                        BOOST_TEST(c.node(n).cli({"EXISTS", st.lock_key(name)}) == "1");
            }
            BOOST_TEST(per_master.size() == 3u);
            long long total_locks = 0;
            for (std::size_t n = 0; n < c.size(); ++n) {
                auto size = to_ll(c.node(n).cli({"DBSIZE"}));
                BOOST_TEST(size > 10, "node " << n << " holds " << size << " keys");
                // Each lock key has its slot's fencing counter next to it.
                std::string keys = c.node(n).cli({"KEYS", "*spread:lock:*"});
                total_locks += std::count(keys.begin(), keys.end(), '\n') + (keys.empty() ? 0 : 1);
            }
            BOOST_TEST(total_locks == names);
            BOOST_TEST(st.stats().moved == 0u);  // the map was right from the start
            st.close();
        },
        30s);
}

BOOST_AUTO_TEST_CASE(slot_migration_is_followed)
{
    redis_cluster c;
    asio::io_context io;
    dlock::cluster_options opts;
    opts.max_redirects = 5;
    opts.tryagain_delay = 5ms;
    opts.tryagain_limit = 30s;  // the waits below end with the migration, however slow the machine
    dlock::cluster_store st(io.get_executor(), c.seeds(), "mig", opts);
    const std::string name = "migrating";
    const unsigned slot = dlock::key_slot(st.lock_key(name));
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            notifier note(io.get_executor());
            std::vector<dlock::watch_event> events;
            auto id = st.watch(name, [&](dlock::watch_event ev) {
                events.push_back(ev);
                note.notify();
            });
            BOOST_REQUIRE(co_await note.wait([&] { return !events.empty(); }));
            BOOST_TEST((events.front() == dlock::watch_event::ready));

            auto a = co_await st.async_try_acquire(name, "owner-a", 30s, asio::use_awaitable);
            BOOST_REQUIRE(a.acquired);
            std::size_t from = c.owner_of(slot), to = (from + 1) % c.size();
            BOOST_REQUIRE(from < c.size());
            BOOST_TEST(st.master_of(name) == c.address(from));

            // Mid-migration, keys moved: the source answers ASK, the target serves with ASKING.
            c.begin_migration(slot, from, to);
            BOOST_TEST(c.migrate_keys(slot, from, to) >= 2u);  // the lock and the slot's counter
            auto r = co_await st.async_renew(name, "owner-a", 30s, asio::use_awaitable);
            BOOST_TEST(r.owned);
            BOOST_TEST(st.stats().ask >= 1u);
            // Scripts over several keys (the hand-off queue's keys exist nowhere) get TRYAGAIN
            // while the slot's keys are split, and are routed again until the migration ends.
            std::optional<dlock::acquire_result> b;
            std::optional<dlock::lock_status> s;
            st.async_try_acquire(name, "owner-b", 30s, [&](error_code ec, dlock::acquire_result r) {
                BOOST_TEST(!ec, ec.message());
                b = r;
            });
            st.async_status(name, [&](error_code ec, dlock::lock_status r) {
                BOOST_TEST(!ec, ec.message());
                s = std::move(r);
            });
            BOOST_TEST(co_await dlock::test::eventually([&] { return st.stats().tryagain >= 4u; }));
            BOOST_TEST((!b && !s), "answered while the slot's keys were split");
            // The migration ends: the old master answers MOVED, the store follows.
            auto moved = st.stats().moved;
            c.finish_migration(slot, to);
            BOOST_TEST(co_await dlock::test::eventually([&] { return b && s; }));
            BOOST_REQUIRE((b && s));
            BOOST_TEST(!b->acquired);
            BOOST_TEST(b->holder_ttl.count() > 20000);
            BOOST_TEST(s->holder == "owner-a");
            BOOST_TEST(s->fencing_token == a.fencing_token);
            BOOST_TEST(st.stats().moved > moved);
            BOOST_TEST(st.stats().redirect_failures == 0u);
            BOOST_TEST((co_await st.async_release(name, "owner-a", asio::use_awaitable)));
            // Only the slot's counter is left (on the target; the source has nothing).
            BOOST_TEST(c.node(to).cli({"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}) == "1");
            BOOST_TEST(c.node(from).cli({"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}) == "0");

            // The fencing counter moved with the slot, so tokens keep increasing.
            auto d = co_await st.async_try_acquire(name, "owner-d", 30s, asio::use_awaitable);
            BOOST_TEST(d.acquired);
            BOOST_TEST(d.fencing_token > a.fencing_token);
            BOOST_TEST(c.node(to).cli({"EXISTS", st.lock_key(name)}) == "1");

            // The old master dropped the channel (its slot left): the store subscribes on the
            // new one and tells the watcher to re-check; releases wake it from there.
            BOOST_TEST(co_await note.wait(
                [&] { return std::count(events.begin(), events.end(), dlock::watch_event::resync) >= 1; }));
            BOOST_TEST(st.master_of(name) == c.address(to));
            BOOST_TEST(st.stats().resubscribes + st.stats().server_unsubscribes >= 1u);
            auto before = std::count(events.begin(), events.end(), dlock::watch_event::released);
            BOOST_TEST((co_await st.async_release(name, "owner-d", asio::use_awaitable)));
            BOOST_TEST(co_await note.wait(
                [&] { return std::count(events.begin(), events.end(), dlock::watch_event::released) > before; }));
            auto e = co_await st.async_try_acquire(name, "owner-e", 30s, asio::use_awaitable);
            BOOST_TEST(e.acquired);
            BOOST_TEST(e.fencing_token > d.fencing_token);

            // Waited out for tryagain_limit only: mid-way back, a store with a short limit
            // gives up as server_busy (transient: the caller retries once it is over).
            c.begin_migration(slot, to, from);
            BOOST_TEST(c.migrate_keys(slot, to, from) >= 2u);
            dlock::cluster_options quick_opts = opts;
            quick_opts.tryagain_limit = 50ms;
            dlock::cluster_store quick(io.get_executor(), c.seeds(), "mig", quick_opts);
            auto [ec, stuck] = co_await quick.async_try_acquire(name, "owner-f", 30s, tuple);
            BOOST_TEST((ec == dlock::error::server_busy));
            BOOST_TEST(quick.last_error_text().find("TRYAGAIN") != std::string::npos, quick.last_error_text());
            BOOST_TEST(!stuck.acquired);
            BOOST_TEST(quick.stats().redirect_failures == 1u);
            BOOST_TEST(quick.stats().tryagain >= 2u);
            c.finish_migration(slot, from);
            BOOST_TEST((co_await quick.async_release(name, "owner-e", asio::use_awaitable)));
            quick.close();
            st.unwatch(id);
            st.close();
        },
        30s);
}

BOOST_AUTO_TEST_CASE(mutual_exclusion_across_processes)
{
    redis_cluster c;
    const std::string dir = dlock::test::scratch_dir("dlock-cl");
    std::string counter = std::string(dir) + "/counter", log = std::string(dir) + "/log";
    constexpr int processes = 3, coroutines = 8, sections = 30;  // 720 sections
    std::vector<std::unique_ptr<dlock::test::child>> workers;
    for (int p = 0; p < processes; ++p)
        workers.push_back(std::make_unique<dlock::test::child>(dlock::test::count_worker(
            "cluster:" + std::to_string(c.node(p).port()), "cmx", coroutines, sections, counter, log)));
    long woken = 0;
    for (auto& line : dlock::test::expect_all_done(workers, 60s)) {
        auto at = line.find("by_notification=");
        if (at != std::string::npos)
            woken += std::stol(line.substr(at + 16));
    }
    // Waiters in one process were woken by releases in another: SPUBLISH reached the
    // SSUBSCRIBEd connections of the other processes.
    BOOST_TEST(woken > 0);
    dlock::test::check_count_log(counter, log, processes, processes * coroutines * sections);
}

// Latches and elections: redis_store's scripts in the name's slot, their notifications
// (the latch's `done`, a proclaim) reaching the other store's watchers over sharded pub/sub.
BOOST_AUTO_TEST_CASE(latches_and_elections_across_two_stores)
{
    redis_cluster c;
    asio::io_context io;
    dlock::cluster_store a_st(io.get_executor(), c.node(0).config()), b_st(io.get_executor(), c.node(1).config());
    dlock::registry a(a_st, {.lease = 3s}), b(b_st, {.lease = 3s});
    auto want = dlock::capability::latch | dlock::capability::election;
    BOOST_TEST((a_st.capabilities() & want) == want);
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            // The latch: B waits; A counts down, then B; B's wait ends at the last one.
            dlock::latch la(a, "batch", 2), lb(b, "batch", 2);
            task_group tasks(io.get_executor());
            std::optional<error_code> woke;
            auto waiting = [&]() -> asio::awaitable<void> {
                auto [ec] = co_await lb.wait(tuple);
                woke = ec;
            };
            tasks.spawn(waiting());
            BOOST_TEST(co_await la.count_down("a", asio::use_awaitable) == 1u);
            BOOST_TEST(co_await la.count_down("a", asio::use_awaitable) == 1u);  // a member counts once
            BOOST_TEST(!woke.has_value(), "woken with one count-down left");
            BOOST_TEST(co_await lb.count_down("b", asio::use_awaitable) == 0u);
            co_await tasks.join();
            BOOST_REQUIRE(woke.has_value());
            BOOST_TEST(!*woke, woke->message());
            dlock::latch other(b, "batch", 3);  // another count on the same name
            auto [cec, left] = co_await other.count_down("c", tuple);
            BOOST_TEST(cec == dlock::error::count_mismatch, cec.message());

            // The election: A leads, B's observer sees each value, B leads once A resigns.
            dlock::election ea(a, "lead"), eb(b, "lead");
            auto l = co_await ea.campaign("alpha", asio::use_awaitable);
            auto obs = eb.observe();
            auto first = co_await obs.async_next(asio::use_awaitable);
            BOOST_TEST(first.value == "alpha");
            BOOST_TEST(first.term == l.term());
            co_await l.proclaim("alpha-2", asio::use_awaitable);
            auto second = co_await obs.async_next(asio::use_awaitable);
            BOOST_TEST(second.value == "alpha-2");
            std::optional<dlock::leadership> lb_lead;
            auto campaign_b = [&]() -> asio::awaitable<void> {
                lb_lead = co_await eb.campaign("beta", asio::use_awaitable);
            };
            tasks.spawn(campaign_b());
            auto term = l.term();
            co_await l.resign(asio::use_awaitable);
            co_await tasks.join();
            BOOST_REQUIRE(lb_lead.has_value());
            BOOST_TEST(lb_lead->is_leader());
            BOOST_TEST(lb_lead->term() > term);
            dlock::leader_info next;
            for (int i = 0; i < 4 && next.value != "beta"; ++i)
                next = co_await obs.async_next(asio::use_awaitable);
            BOOST_TEST(next.value == "beta");
            co_await lb_lead->resign(asio::use_awaitable);
            a_st.close();
            b_st.close();
        },
        60s);
}

BOOST_AUTO_TEST_SUITE_END()
