// SPDX-License-Identifier: BSL-1.0
// etcd_store on a real 3-member etcd cluster: exclusion across processes, interop with
// `etcdctl lock`, and faults (leader killed, holder paused, quorum lost, watch cut), bad input.
#include <dlock/dlock.hpp>
#include <dlock/etcd.hpp>

#include "common/child.hpp"
#include "common/etcd_cluster.hpp"
#include "common/redis_server.hpp"
#include "common/tcp_proxy.hpp"
#include "integration/cli_handoff.hpp"
#include "integration/mutual_exclusion.hpp"
#include "integration/support.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <stdlib.h>

#include <fstream>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using dlock::test::etcd_cluster;
using dlock::test::run_test;

namespace {

dlock::etcd::config config_of(const std::string& url)
{
    dlock::etcd::config c;
    dlock::etcd::config_error err;
    if (!dlock::etcd::parse_url(url, c, err))
        throw std::runtime_error(err.message);
    return c;
}

std::string temp_dir()
{
    char dir[] = "/tmp/dlock-etcd-XXXXXX";
    if (!::mkdtemp(dir))
        throw std::runtime_error("mkdtemp failed");
    return dir;
}

std::string cli_path()
{
    return DLOCK_CLI_PATH;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(etcd)

// Three processes, ten coroutines each, on one name: the count is exact and the fencing
// tokens (create revisions) rise in lock order.
BOOST_AUTO_TEST_CASE(mutual_exclusion_across_processes)
{
    etcd_cluster c;
    auto dir = temp_dir();
    std::string counter = dir + "/counter", log = dir + "/log";
    constexpr int processes = 3, coroutines = 10, sections = 20;  // 600 sections
    std::vector<std::unique_ptr<dlock::test::child>> workers;
    for (int p = 0; p < processes; ++p)
        workers.push_back(std::make_unique<dlock::test::child>(
            std::vector<std::string>{dlock::test::worker_path(), "count", c.url(), "emx", std::to_string(coroutines),
                                     std::to_string(sections), counter, log}));
    for (auto& w : workers) {
        auto line = w->read_line(120s);
        BOOST_TEST_MESSAGE("worker: " << line.value_or("<none>"));
        BOOST_TEST((line && line->rfind("done", 0) == 0));
        BOOST_TEST(w->wait() == 0);
    }
    auto r = dlock::test::check_count_log(counter, log, processes, processes * coroutines * sections);
    BOOST_TEST(r.switches > 3u, "process switches: " << r.switches);
}

// Issue 29 item 2: a lock handed to another process is held for several leases.
BOOST_AUTO_TEST_CASE(a_lock_handed_to_another_run_is_held_to_its_end)
{
    etcd_cluster c(1);
    dlock::test::check_cli_handoff_then_long_hold(cli_path(), c.url(), "handed");
}

// `etcdctl lock NAME -- cmd` and `dlock run --prefix '' NAME -- cmd` exclude each other: each
// section appends "in" and "out" lines to one file; no two sections may interleave.
BOOST_AUTO_TEST_CASE(interop_with_etcdctl_lock)
{
    etcd_cluster c;
    auto dir = temp_dir();
    std::string trace = dir + "/trace";
    // A section long enough that an overlap would show: in, 50 ms of work, out.
    std::string section = "echo \"in $0\" >> " + trace + "; sleep 0.05; echo \"out $0\" >> " + trace;
    std::vector<std::unique_ptr<dlock::test::child>> runs;
    for (int i = 0; i < 4; ++i) {
        runs.push_back(std::make_unique<dlock::test::child>(
            std::vector<std::string>{"/usr/bin/env", "ETCDCTL_API=3", "etcdctl", "--endpoints=" + c.endpoints_csv(),
                                     "lock", "shared", "--", "sh", "-c", section, "etcdctl" + std::to_string(i)}));
        runs.push_back(std::make_unique<dlock::test::child>(
            std::vector<std::string>{cli_path(), "run", "--url", c.url(), "--prefix", "", "--lease", "2s", "shared",
                                     "--", "sh", "-c", section, "dlock" + std::to_string(i)}));
    }
    for (auto& r : runs)
        BOOST_TEST(r->wait(60s) == 0);
    std::ifstream in(trace);
    std::string word, who, inside;
    int sections = 0, by_dlock = 0, by_etcdctl = 0;
    while (in >> word >> who) {
        if (word == "in") {
            BOOST_TEST(inside.empty(), who << " entered while " << inside << " was inside");
            inside = who;
        } else {
            BOOST_TEST(inside == who);
            inside.clear();
            ++sections;
            (who.rfind("dlock", 0) == 0 ? by_dlock : by_etcdctl)++;
        }
    }
    BOOST_TEST(sections == 8);
    BOOST_TEST(by_dlock == 4);
    BOOST_TEST(by_etcdctl == 4);
}

// A holder and a waiter (two stores: two sessions) while the leader is SIGKILLed: never two
// holders; the holder keeps its lease or is told it lost it; the waiter proceeds.
BOOST_AUTO_TEST_CASE(leader_killed_while_held_and_waited)
{
    etcd_cluster c;
    asio::io_context io;
    dlock::etcd_store holder_store(io.get_executor(), config_of(c.url()));
    dlock::etcd_store waiter_store(io.get_executor(), config_of(c.url()));
    dlock::registry holder(holder_store, {.lease = 3s});
    dlock::registry waiter(waiter_store, {.lease = 3s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto g = co_await holder.obtain("job").acquire();
            auto first = g.fencing_token();
            bool released = false, waiter_got = false;
            std::uint64_t waiter_token = 0;
            dlock::test::notifier wake(io.get_executor());
            dlock::test::task_group tasks(io.get_executor());
            auto wait_for_job = [&]() -> asio::awaitable<void> {
                auto w = co_await waiter.obtain("job").acquire();
                BOOST_TEST((released || g.is_lost()), "the waiter got the lock while the holder held it");
                waiter_got = true;
                waiter_token = w.fencing_token();
                co_await w.release();
                wake.notify();
            };
            tasks.spawn(wait_for_job());
            auto leader = c.leader();
            BOOST_TEST_MESSAGE("killing leader " << leader);
            c.kill(leader);
            BOOST_TEST(c.wait_leader(20s));
            // Some time under the new leader: keep-alives move to a live member.
            asio::steady_timer t(io, 4s);
            co_await t.async_wait(asio::use_awaitable);
            BOOST_TEST((!waiter_got || g.is_lost()));
            BOOST_TEST_MESSAGE("holder lost: " << g.is_lost() << ", on " << holder_store.current_member());
            released = true;
            auto [ec] = co_await g.release(asio::as_tuple(asio::use_awaitable));
            BOOST_TEST((!ec || ec == dlock::error::lock_lost), ec.message());
            BOOST_TEST((co_await wake.wait([&] { return waiter_got; }, 20s)));
            BOOST_TEST(waiter_token > first);
            co_await tasks.join(10s);
            holder_store.close();
            waiter_store.close();
        },
        60s);
}

// A holder paused past its lease: another takes the lock with a larger token; on resume the
// holder learns it lost (the keep-alive was unconfirmed past the local deadline).
BOOST_AUTO_TEST_CASE(paused_holder_learns_of_loss_and_is_fenced)
{
    etcd_cluster c;
    dlock::test::child holder({dlock::test::worker_path(), "hold", c.url(), "p", "1000"});
    auto line = holder.read_line();
    BOOST_REQUIRE((line && line->rfind("acquired ", 0) == 0));
    std::uint64_t old_token = std::stoull(line->substr(9));
    holder.signal(SIGSTOP);
    asio::io_context io;
    dlock::etcd_store store(io.get_executor(), config_of(c.url()));
    dlock::registry reg(store, {.lease = 2s});
    std::uint64_t new_token = 0;
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto g = co_await reg.obtain("p").acquire_for(15s);
            new_token = g.fencing_token();
            holder.signal(SIGCONT);
            auto result = holder.read_line(20s);
            BOOST_REQUIRE(result.has_value());
            BOOST_TEST(*result == "lost=1 token=" + std::to_string(old_token));
            co_await g.release();
            store.close();
        },
        40s);
    BOOST_TEST(new_token > old_token);
    BOOST_TEST(holder.wait() == 0);
}

// With 2 of 3 members down nothing can be granted: an acquire with a bound fails in bounded
// time with an error that says why; once they return, the lock works again.
BOOST_AUTO_TEST_CASE(quorum_lost_fails_in_bounded_time)
{
    etcd_cluster c;
    asio::io_context io;
    auto cfg = config_of(c.url());
    cfg.request_timeout = 1s;
    dlock::etcd_store store(io.get_executor(), cfg);
    dlock::registry reg(store, {.lease = 2s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto warm = co_await reg.obtain("q0").acquire();
            co_await warm.release();
            c.kill(0);
            c.kill(1);
            auto t0 = std::chrono::steady_clock::now();
            auto [ec, g] = co_await reg.obtain("q").acquire_for(3s, asio::as_tuple(asio::use_awaitable));
            auto took = std::chrono::steady_clock::now() - t0;
            BOOST_TEST(!!ec);
            BOOST_TEST(!g);
            BOOST_TEST_MESSAGE("quorum lost: " << ec.message() << " / " << store.last_error_text());
            BOOST_TEST((took < 10s));
            c.start(0);
            c.start(1);
            BOOST_TEST(c.wait_leader(20s));
            // A Txn that timed out for us may still commit once the quorum is back: its key
            // then holds the name for nobody until the lease we gave up on ends (we revoke it).
            auto s = co_await store.async_status("dlock:q", asio::use_awaitable);
            BOOST_TEST_MESSAGE("after recovery: held " << s.held << ", key " << s.key << ", members "
                                                       << c.endpoints_csv() << ", leader " << c.leader()
                                                       << ", store on " << store.current_member());
            auto [ec2, again] = co_await reg.obtain("q").acquire_for(15s, asio::as_tuple(asio::use_awaitable));
            BOOST_TEST(!ec2, ec2.message() << " / " << store.last_error_text());
            if (again)
                co_await again.release();
            store.close();
        },
        60s);
}

// The waiter's connections (its watch among them) are cut mid-wait: it still gets the lock
// at the holder's release.
BOOST_AUTO_TEST_CASE(watch_cut_mid_wait_does_not_strand_the_waiter)
{
    etcd_cluster c;
    dlock::test::tcp_proxy proxy(c.client_port(0), false);
    asio::io_context io;
    dlock::etcd_store holder_store(io.get_executor(), config_of(c.url()));
    dlock::etcd_store waiter_store(io.get_executor(), config_of("etcd://127.0.0.1:" + std::to_string(proxy.port())));
    dlock::registry holder(holder_store, {.lease = 3s});
    // Retry timers far beyond the test: only the store's own recovery can wake the waiter.
    dlock::registry waiter(waiter_store, {.lease = 3s, .backoff_min = 5s, .backoff_max = 30s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto g = co_await holder.obtain("w").acquire();
            bool got = false;
            dlock::test::notifier wake(io.get_executor());
            dlock::test::task_group tasks(io.get_executor());
            auto wait_for_it = [&]() -> asio::awaitable<void> {
                auto w = co_await waiter.obtain("w").acquire();
                got = true;
                wake.notify();
                co_await w.release();
            };
            tasks.spawn(wait_for_it());
            // Cut once it is queued behind the holder and watching (a second connection).
            asio::steady_timer t(io);
            bool queued = false;
            for (int i = 0; i < 500 && !(queued && proxy.live_connections() >= 2); ++i) {
                queued = (co_await holder_store.async_status("dlock:w", asio::use_awaitable)).queued == 1;
                t.expires_after(10ms);
                co_await t.async_wait(asio::use_awaitable);
            }
            BOOST_TEST(queued);
            BOOST_TEST(proxy.drop_connections() >= 2u);
            auto before = waiter.stats();
            co_await g.release();
            BOOST_TEST((co_await wake.wait([&] { return got; }, 10s)));
            auto after = waiter.stats();
            BOOST_TEST_MESSAGE("by notification " << after.woken_by_notification - before.woken_by_notification
                                                  << ", by timer " << after.woken_by_timer - before.woken_by_timer
                                                  << ", store hand-offs " << after.store_handoffs);
            // The grant came through the watch made again after the cut, not a retry timer.
            BOOST_TEST(after.woken_by_notification > before.woken_by_notification);
            co_await tasks.join(10s);
            holder_store.close();
            waiter_store.close();
        },
        40s);
}

// A `dlock release --force` of the holder's key: the holder's watchdog finds it gone.
BOOST_AUTO_TEST_CASE(forced_release_is_seen_by_the_holder)
{
    etcd_cluster c;
    asio::io_context io;
    dlock::etcd_store store(io.get_executor(), config_of(c.url()));
    dlock::registry reg(store, {.lease = 3s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto g = co_await reg.obtain("f").acquire();
            int status = -1;
            auto st = dlock::test::run_capture({cli_path(), "status", "--json", "--url", c.url(), "f"}, &status);
            BOOST_TEST(status == 0, st);
            BOOST_TEST(st.find("\"held\":true") != std::string::npos, st);
            BOOST_TEST(st.find("\"fencing_token\":" + std::to_string(g.fencing_token())) != std::string::npos, st);
            auto out = dlock::test::run_capture({cli_path(), "release", "--force", "--url", c.url(), "f"}, &status);
            BOOST_TEST(status == 0, out);
            asio::steady_timer t(io, 3s);  // a watchdog round (lease / 3) and then some
            co_await t.async_wait(asio::bind_cancellation_slot(g.lost_slot(), asio::as_tuple(asio::use_awaitable)));
            BOOST_TEST(g.is_lost());
            auto [ec] = co_await g.release(asio::as_tuple(asio::use_awaitable));
            BOOST_TEST((ec == dlock::error::lock_lost));
            store.close();
        },
        30s);
}

// etcd's own layout, `<name>/<lease hex>`, for every acquire of a store (one key name per
// lease, however many cycles: etcd keeps deleted key names until compaction); a second
// token of the same store at once takes `-1`.
BOOST_AUTO_TEST_CASE(keys_follow_etcds_layout)
{
    etcd_cluster c;
    asio::io_context io;
    dlock::etcd_store store(io.get_executor(), config_of(c.url()));
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            char hex[32];
            for (int i = 0; i < 3; ++i) {
                auto a = co_await store.async_try_acquire("layout", "t" + std::to_string(i), 2s, asio::use_awaitable);
                BOOST_TEST(a.acquired);
                std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(store.session().generation));
                BOOST_TEST(a.lease_ref == "layout/" + std::string(hex));
                if (i == 2) {  // a second token while the first holds: the next slot
                    dlock::lease_request q{"layout", "other", 2s};
                    q.queue = true;
                    auto w = store.watch("layout", "other", [](dlock::watch_event, const dlock::grant_notice&) {});
                    BOOST_TEST(!(co_await store.async_try_acquire(q, asio::use_awaitable)).acquired);
                    BOOST_TEST(store.key_of("layout", "other") == "layout/" + std::string(hex) + "-1");
                    BOOST_TEST((co_await store.async_status("layout", asio::use_awaitable)).queued == 1u);
                    BOOST_TEST(!(co_await store.async_release("layout", "other", asio::use_awaitable)));
                    store.unwatch(w);
                }
                BOOST_TEST((co_await store.async_release("layout", "t" + std::to_string(i), asio::use_awaitable)));
            }
            auto keys = c.etcdctl({"get", "--prefix", "layout/", "--keys-only"});
            BOOST_TEST(keys.empty(), keys);
            store.close();
        },
        30s);
}

// Bad input: each a clear error, nothing hangs.
BOOST_AUTO_TEST_CASE(bad_input_is_a_clear_error)
{
    {
        dlock::etcd::config c;
        dlock::etcd::config_error err;
        BOOST_TEST(!dlock::etcd::parse_url("etcd://127.0.0.1:notaport", c, err));
        BOOST_TEST((err.code == dlock::error::invalid_port));
    }
    etcd_cluster c;
    asio::io_context io;
    dlock::etcd_store store(io.get_executor(), config_of(c.url()));
    dlock::test::redis_server redis;  // a server that is not etcd
    dlock::etcd_store wrong(io.get_executor(), config_of("etcd://127.0.0.1:" + std::to_string(redis.port())));
    dlock::etcd_store peer(io.get_executor(),
                           config_of("etcd://127.0.0.1:" + std::to_string(c.peer_port(0))));  // HTTP, not the gateway
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            // Not whole seconds.
            auto [e1, r1] = co_await store.async_try_acquire("b", "t", 1500ms, asio::as_tuple(asio::use_awaitable));
            BOOST_TEST((e1 == dlock::error::invalid_lease));
            BOOST_TEST(store.last_error_text().find("whole seconds") != std::string::npos);
            // A registry refuses such a lease before anything is sent.
            dlock::registry bad(store, {.lease = 1500ms});
            auto [e2, g2] = co_await bad.obtain("b").try_acquire(asio::as_tuple(asio::use_awaitable));
            BOOST_TEST(!!e2);
            BOOST_TEST(!g2);
            // Not etcd.
            for (auto* s : {&wrong, &peer}) {
                auto [e3, r3] = co_await s->async_try_acquire("b", "t", 2s, asio::as_tuple(asio::use_awaitable));
                BOOST_TEST((e3 == dlock::error::protocol_error), s->describe() << ": " << e3.message());
                BOOST_TEST(!dlock::is_transient(e3));
                BOOST_TEST_MESSAGE(s->last_error_text());
            }
            store.close();
            wrong.close();
            peer.close();
        },
        30s);
}

// Issue 29, items 7 and 8: a 1 MiB name (a registry with a raised max_name_length lets it
// through) makes a request over the server's limits: a permanent error at once, whose text
// names the problem, not a busy server retried until the acquire's bound. status() tells a
// holder's time left, from its own store and from another (etcd's whole seconds read 0 for
// a lease under 2 s).
BOOST_AUTO_TEST_CASE(a_name_too_long_fails_at_once_and_status_tells_the_time_left)
{
    etcd_cluster c(1);
    asio::io_context io;
    dlock::etcd_store store(io.get_executor(), config_of(c.url())), other(io.get_executor(), config_of(c.url()));
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            std::string big(1 << 20, 'n');
            auto [e1, r1] = co_await store.async_try_acquire(big, "t", 1s, asio::as_tuple(asio::use_awaitable));
            BOOST_TEST((e1 == dlock::error::invalid_request), e1.message() << " / " << store.last_error_text());
            BOOST_TEST(!dlock::is_transient(e1));
            BOOST_TEST(store.last_error_text().find("max-request-bytes") != std::string::npos,
                       store.last_error_text());
            dlock::registry reg(store, {.lease = 1s, .max_name_length = 2 << 20});
            auto [e2, g2] = co_await reg.obtain(big).acquire_for(10s, asio::as_tuple(asio::use_awaitable));
            BOOST_TEST((e2 == dlock::error::invalid_request), e2.message());
            // One holds; the holder's store and another read the time left.
            auto g = co_await reg.obtain("left").acquire();
            for (auto* st : {&store, &other}) {
                auto s = co_await st->async_status("dlock:left", asio::use_awaitable);
                BOOST_TEST(s.held);
                BOOST_TEST((s.ttl.count() > 0 && s.ttl.count() <= 1000), s.ttl.count());
            }
            co_await g.release();
            store.close();
            other.close();
        },
        60s);
}

// A lease below the cluster's minimum (set by its election timeout): refused, clearly.
BOOST_AUTO_TEST_CASE(lease_below_the_cluster_minimum_is_refused)
{
    etcd_cluster c(1, {.election_timeout = 2000ms});  // minimum TTL: 3 s
    asio::io_context io;
    dlock::etcd_store store(io.get_executor(), config_of(c.url()));
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto [ec, r] = co_await store.async_try_acquire("m", "t", 1s, asio::as_tuple(asio::use_awaitable));
            BOOST_TEST((ec == dlock::error::invalid_lease));
            BOOST_TEST(store.last_error_text().find("minimum") != std::string::npos, store.last_error_text());
            auto ok = co_await store.async_try_acquire("m", "t", 3s, asio::use_awaitable);
            BOOST_TEST(ok.acquired);
            store.close();
        },
        30s);
}

BOOST_AUTO_TEST_SUITE_END()
