// SPDX-License-Identifier: BSL-1.0
// zookeeper_store on a real ZooKeeper ensemble: the consensus scenarios (consensus/scenarios.hpp)
// and what only ZooKeeper has: interop with Apache Curator's InterProcessMutex (a Java program
// compiled here), a long hold kept by the session, a waiter's predecessor gone, requests and
// replies lost with their connection, a node of a session given up.
#include "common/tcp_proxy.hpp"
#include "integration/consensus/scenarios.hpp"
#include "integration/consensus/zookeeper_family.hpp"
#include "integration/curator.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include <filesystem>

using namespace dlock::test;  // its asio alias and chrono literals too

namespace {

dlock::zookeeper::config config_of(const std::string& url)
{
    return zookeeper_family::config_of(url);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zookeeper)

// The consensus scenarios, under ZooKeeper's names for the tool's case and the size limit's.
DLOCK_CONSENSUS_CASES(zookeeper_family, the_tool_runs_reports_and_forces_a_release, permanent_errors_fail_at_once)

// The headline: Java services locking with Curator's InterProcessMutex and dlock processes on
// the same path exclude each other. Two of each count on one shared file: the count is
// exact, and the fencing tokens (czxids, both sides log them) rise in file order.
BOOST_AUTO_TEST_CASE(interop_with_curator_counts_exactly)
{
    zk_ensemble z;
    curator_dir();  // compiled before the clock starts mattering
    auto dir = temp_dir("dlock-zkt");
    std::string counter = dir + "/counter", log = dir + "/log";
    // lock_worker's registry puts "dlock:" before the name: Curator locks /dlock/dlock:shared.
    std::vector<std::unique_ptr<child>> procs;
    for (int i = 0; i < 2; ++i) {
        procs.push_back(
            std::make_unique<child>(curator({"count", z.connect_string(), "/dlock/dlock:shared", "60", counter, log})));
        procs.push_back(
            std::make_unique<child>(count_worker(z.url("?session_timeout=4s"), "shared", 3, 20, counter, log)));
    }
    expect_all_done(procs);
    auto r = check_count_log(counter, log, 4, 2 * 60 + 2 * 3 * 20);
    BOOST_TEST(r.switches > 3u, "process switches: " << r.switches);
    std::filesystem::remove_all(dir);
}

// Both ways, step by step: a Curator holder keeps dlock out and hands over to it; a dlock
// holder keeps a Curator waiter queued (its node behind ours) until it releases.
BOOST_AUTO_TEST_CASE(interop_with_curator_both_ways)
{
    zk_ensemble z;
    curator_dir();
    asio::io_context io;
    dlock::zookeeper_store store(io.get_executor(), config_of(z.url("?session_timeout=4s")));
    dlock::registry reg(store, {.lease = 3s});
    child holder(curator({"hold", z.connect_string(), "/dlock/dlock:both", "4000"}));
    auto line = holder.read_line(60s);
    BOOST_REQUIRE((line && line->rfind("acquired ", 0) == 0));
    std::uint64_t java_token = std::stoull(line->substr(9));
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            // Curator holds: dlock cannot take it, and sees Curator's node as the holder.
            auto [ec, none] = co_await reg.obtain("both").try_acquire(asio::as_tuple(asio::use_awaitable));
            BOOST_TEST(!none);
            auto s = co_await store.async_status("dlock:both", asio::use_awaitable);
            BOOST_TEST(s.held);
            BOOST_TEST(s.fencing_token == java_token);
            BOOST_TEST(s.key.find("/dlock/dlock:both/_c_") == 0u, s.key);
            // dlock waits in line and gets it when Curator releases, with a larger token.
            auto g = co_await reg.obtain("both").acquire_for(30s);
            BOOST_TEST(g.fencing_token() > java_token);
            BOOST_TEST(holder.read_line(10s).value_or("") == "released");
            // dlock holds: a Curator waiter queues behind it and gets it only after the release.
            child waiter(curator({"wait", z.connect_string(), "/dlock/dlock:both"}));
            BOOST_TEST(waiter.read_line(60s).value_or("") == "waiting");
            co_await hand_to_curator(store, "dlock:both", g, waiter);
            BOOST_TEST(waiter.wait() == 0);
            store.close();
        },
        90s);
    BOOST_TEST(holder.wait() == 0);
}

// A critical section many session timeouts long: the session's confirmations keep moving
// the lock's end (no lease silently expires under long work), and it releases cleanly.
BOOST_AUTO_TEST_CASE(a_long_hold_stays_valid)
{
    zk_ensemble z;
    asio::io_context io;
    dlock::zookeeper_store store(io.get_executor(), config_of(z.url("?session_timeout=1s")));
    dlock::registry reg(store, {.lease = 1s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto g = co_await reg.obtain("long").acquire();
            auto first_end = g.valid_until();
            asio::steady_timer t(io, 4s);
            co_await t.async_wait(asio::use_awaitable);
            BOOST_TEST(!g.is_lost());
            BOOST_TEST((g.valid_until() > first_end + 2s));
            BOOST_TEST((g.valid_until() > std::chrono::steady_clock::now()));
            auto [ec] = co_await g.release(asio::as_tuple(asio::use_awaitable));
            BOOST_TEST(!ec, ec.message());
            store.close();
        },
        30s);
}
// Three sessions in line: A holds, B waits behind A, C behind B. B gives up (its session
// closes, its node goes): C looks again, finds A before it and keeps waiting; it gets the
// lock at A's release, not before.
BOOST_AUTO_TEST_CASE(a_waiter_whose_predecessor_goes_keeps_its_place)
{
    zk_ensemble z;
    asio::io_context io;
    auto url = z.url("?session_timeout=4s");
    dlock::zookeeper_store a_store(io.get_executor(), config_of(url)), b_store(io.get_executor(), config_of(url)),
        c_store(io.get_executor(), config_of(url));
    dlock::registry a(a_store, {.lease = 3s}), b(b_store, {.lease = 3s}), c(c_store, {.lease = 3s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            for (auto* st : {&a_store, &b_store, &c_store})  // sessions first: a slow start is not a lost place
                co_await st->async_connect(asio::use_awaitable);
            auto ga = co_await a.obtain("line").acquire();
            bool a_released = false, c_got = false;
            notifier wake(io.get_executor());
            task_group tasks(io.get_executor());
            asio::steady_timer t(io);
            auto queued = [&]() -> asio::awaitable<std::size_t> {
                co_return (co_await a_store.async_status("dlock:line", asio::use_awaitable)).queued;
            };
            asio::cancellation_signal stop_b;
            auto b_waits = [&]() -> asio::awaitable<void> {
                auto [ec, g] = co_await b.obtain("line").acquire(
                    asio::bind_cancellation_slot(stop_b.slot(), asio::as_tuple(asio::use_awaitable)));
                BOOST_TEST(!g, "B got the lock");
            };
            tasks.spawn(b_waits());
            // A waiter first tries (a node made and withdrawn), then queues: its second refused
            // attempt is the node that stays, so the count is read only after it.
            for (int i = 0; i < 3000 && (b.stats().contended < 2 || (co_await queued()) < 1); ++i) {
                t.expires_after(10ms);
                co_await t.async_wait(asio::use_awaitable);
            }
            auto c_waits = [&]() -> asio::awaitable<void> {
                auto g = co_await c.obtain("line").acquire();
                BOOST_TEST(a_released, "C got the lock while A held it");
                c_got = true;
                wake.notify();
                co_await g.release();
            };
            tasks.spawn(c_waits());
            for (int i = 0; i < 3000 && (c.stats().contended < 2 || (co_await queued()) < 2); ++i) {
                t.expires_after(10ms);
                co_await t.async_wait(asio::use_awaitable);
            }
            BOOST_TEST((co_await queued()) == 2u);
            stop_b.emit(asio::cancellation_type::terminal);  // B's node goes
            for (int i = 0; i < 3000 && (co_await queued()) > 1; ++i) {
                t.expires_after(10ms);
                co_await t.async_wait(asio::use_awaitable);
            }
            BOOST_TEST((co_await queued()) == 1u);  // C, still in line
            t.expires_after(500ms);                 // C had time to (wrongly) take it
            co_await t.async_wait(asio::use_awaitable);
            BOOST_TEST(!c_got);
            a_released = true;
            co_await ga.release();
            BOOST_TEST((co_await wake.wait([&] { return c_got; }, 10s)));
            BOOST_TEST(c.stats().woken_by_notification + c.stats().store_handoffs > 0u);
            co_await tasks.join(10s);
            a_store.close();
            b_store.close();
            c_store.close();
        },
        60s);
}
// A store whose connection goes through a proxy the test controls (8 s session), and an
// observer connected directly.
struct proxied_store {
    zk_ensemble z;
    tcp_proxy proxy{z.client_port(0), false};
    asio::io_context io;
    dlock::zookeeper_store store{io.get_executor(),
                                 config_of("zk://127.0.0.1:" + std::to_string(proxy.port()) + "?session_timeout=8s")};
    dlock::zookeeper_store observer{io.get_executor(), config_of(z.url("?session_timeout=4s"))};
};

// A create whose reply is lost (the connection drops while the reply is held back): the
// node exists at the servers; the retry with the same token finds it by its guid and takes
// it, instead of leaving it behind as an orphan that would block the name.
BOOST_FIXTURE_TEST_CASE(a_create_whose_reply_was_lost_is_found_again, proxied_store)
{
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            // The session, and the lock path (a container: it outlives the node for a while).
            auto warm = co_await store.async_try_acquire("lost", "w", 2s, asio::use_awaitable);
            BOOST_TEST(warm.acquired);
            BOOST_TEST((co_await store.async_release("lost", "w", asio::use_awaitable)));
            auto before = store.session().generation;
            proxy.delay_replies(3s);
            bool first_done = false;
            boost::system::error_code first_ec;
            notifier wake(io.get_executor());
            asio::co_spawn(
                io,
                [&]() -> asio::awaitable<void> {
                    auto [ec, r] =
                        co_await store.async_try_acquire("lost", "tok", 2s, asio::as_tuple(asio::use_awaitable));
                    first_ec = ec;
                    first_done = true;
                    wake.notify();
                },
                asio::detached);
            // The servers made the node (seen from another session); its reply is held back.
            asio::steady_timer t(io);
            dlock::lock_status seen;
            for (int i = 0; i < 500 && !seen.held; ++i) {
                seen = co_await observer.async_status("lost", asio::use_awaitable);
                t.expires_after(10ms);
                co_await t.async_wait(asio::use_awaitable);
            }
            BOOST_REQUIRE(seen.held);
            BOOST_TEST(!first_done);
            proxy.drop_connections();
            BOOST_TEST((co_await wake.wait([&] { return first_done; }, 10s)));
            BOOST_TEST((first_ec == dlock::error::connection_lost), first_ec.message());
            BOOST_TEST(dlock::is_transient(first_ec));
            proxy.pass_through();
            auto again = co_await store.async_try_acquire("lost", "tok", 2s, asio::use_awaitable);
            BOOST_TEST(again.acquired);
            BOOST_TEST(again.fencing_token == seen.fencing_token);  // the same node, not a second one
            BOOST_TEST(store.session().generation == before);       // the session survived the cut
            auto after = co_await observer.async_status("lost", asio::use_awaitable);
            BOOST_TEST(after.queued == 0u);
            BOOST_TEST(after.key == seen.key);
            BOOST_TEST((co_await store.async_release("lost", "tok", asio::use_awaitable)));
            BOOST_TEST(!(co_await observer.async_status("lost", asio::use_awaitable)).held);
            store.close();
            observer.close();
        },
        60s);
}

// CI, stop 38 (the fault runs' ZooKeeper stall): a delete lost with its connection while
// the session lives on. Its node stays, in front of every contender, for as long as the
// session does; the release must ask again once the connection is back, not fail.
BOOST_FIXTURE_TEST_CASE(a_release_whose_connection_went_still_deletes_the_node, proxied_store)
{
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto got = co_await store.async_try_acquire("orphan", "tok", 4s, asio::use_awaitable);
            BOOST_REQUIRE(got.acquired);
            auto before = store.session().generation;
            proxy.drop_requests();
            bool done = false, owned = false;
            boost::system::error_code release_ec;
            notifier wake(io.get_executor());
            asio::co_spawn(
                io,
                [&]() -> asio::awaitable<void> {
                    auto [ec, was] = co_await store.async_release("orphan", "tok", asio::as_tuple(asio::use_awaitable));
                    release_ec = ec;
                    owned = was;
                    done = true;
                    wake.notify();
                },
                asio::detached);
            // The delete (some 60 bytes; a ping is 12) went into the void: now the link breaks.
            asio::steady_timer t(io);
            for (int i = 0; i < 500 && proxy.requests_dropped() < 40; ++i) {
                t.expires_after(10ms);
                co_await t.async_wait(asio::use_awaitable);
            }
            BOOST_REQUIRE(proxy.requests_dropped() >= 40u);
            BOOST_TEST(!done);
            proxy.pass_through();
            proxy.drop_connections();
            BOOST_TEST((co_await wake.wait([&] { return done; }, 20s)));
            BOOST_TEST(!release_ec, release_ec.message());
            BOOST_TEST(owned);
            BOOST_TEST(store.session().generation == before);  // gone by the delete, not by the session's end
            BOOST_TEST(!(co_await observer.async_status("orphan", asio::use_awaitable)).held);
            store.close();
            observer.close();
        },
        60s);
}

// Issue 29, item 1: H holds; A waits through a proxy, B waits directly. The proxy holds A's
// replies back longer than the session timeout: A's store gives its session up and queues
// again in a new one once the stall ends, while its old node lives on at the server until
// that session expires. A must not take that node for its own: A and B never hold at once,
// and the fencing tokens rise in the order the lock was granted.
BOOST_AUTO_TEST_CASE(a_node_of_a_session_given_up_is_never_adopted)
{
    zk_ensemble z(1);
    tcp_proxy proxy(z.client_port(0), false);
    asio::io_context io;
    const std::string direct = z.url("?session_timeout=2s");
    const std::string stalled = "zk://127.0.0.1:" + std::to_string(proxy.port()) + "?session_timeout=2s";
    dlock::zookeeper_store h_store(io.get_executor(), config_of(direct)), b_store(io.get_executor(), config_of(direct)),
        a_store(io.get_executor(), config_of(stalled));
    dlock::registry h(h_store, {.lease = 2s}), a(a_store, {.lease = 2s}), b(b_store, {.lease = 2s});
    int holding = 0, most = 0;
    std::vector<std::pair<char, std::uint64_t>> grants;  // who, fencing token, in grant order
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            for (auto* st : {&h_store, &a_store, &b_store})
                co_await st->async_connect(asio::use_awaitable);
            auto gh = co_await h.obtain("two").acquire();
            task_group tasks(io.get_executor());
            asio::steady_timer t(io);
            auto queued = [&]() -> asio::awaitable<std::size_t> {
                co_return (co_await h_store.async_status("dlock:two", asio::use_awaitable)).queued;
            };
            auto run = [&](dlock::registry& reg, char who) -> asio::awaitable<void> {
                auto [ec, g] = co_await reg.obtain("two").acquire_for(30s, asio::as_tuple(asio::use_awaitable));
                BOOST_TEST_REQUIRE(!ec, who << ": " << ec.message());
                grants.emplace_back(who, g.fencing_token());
                most = std::max(most, ++holding);
                asio::steady_timer hold(co_await asio::this_coro::executor, 2500ms);  // the command runs
                co_await hold.async_wait(asio::use_awaitable);
                --holding;
                co_await g.release(asio::as_tuple(asio::use_awaitable));
            };
            // A queues first (its second, queued attempt leaves the node that stays), then B.
            tasks.spawn(run(a, 'A'));
            for (int i = 0; i < 1000 && (a.stats().contended < 2 || (co_await queued()) < 1); ++i) {
                t.expires_after(10ms);
                co_await t.async_wait(asio::use_awaitable);
            }
            tasks.spawn(run(b, 'B'));
            for (int i = 0; i < 1000 && (b.stats().contended < 2 || (co_await queued()) < 2); ++i) {
                t.expires_after(10ms);
                co_await t.async_wait(asio::use_awaitable);
            }
            BOOST_REQUIRE((co_await queued()) == 2u);
            auto old_session = a_store.session().generation;
            proxy.stall_replies(2400ms);
            // A gives its session up, opens another when the stall ends and queues again: its
            // old node (alive until the server expires it), B's and its new one wait behind H.
            for (int i = 0; i < 1000 && (a_store.session().generation == old_session ||
                                         a_store.session().generation == 0 || (co_await queued()) < 3);
                 ++i) {
                t.expires_after(10ms);
                co_await t.async_wait(asio::use_awaitable);
            }
            BOOST_REQUIRE(a_store.session().generation != old_session);
            co_await gh.release();
            co_await tasks.join(30s);
            for (auto* st : {&h_store, &a_store, &b_store})
                st->close();
        },
        60s);
    BOOST_TEST(most == 1, "A and B held the lock at the same time");
    BOOST_REQUIRE(grants.size() == 2u);
    BOOST_TEST(grants[0].first == 'B');  // A's place went with its first session
    BOOST_TEST(grants[0].second < grants[1].second);
}

BOOST_AUTO_TEST_SUITE_END()
