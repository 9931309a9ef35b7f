// SPDX-License-Identifier: BSL-1.0
// etcd_store on a real etcd cluster: the consensus scenarios (consensus/scenarios.hpp) and what
// only etcd has: interop with `etcdctl lock`, a watch cut mid-wait, etcd's key layout, the
// cluster's minimum lease.
#include "common/tcp_proxy.hpp"
#include "integration/consensus/etcd_family.hpp"
#include "integration/consensus/scenarios.hpp"

#include <fstream>

using namespace dlock::test;  // its asio alias and chrono literals too

namespace {

dlock::etcd::config config_of(const std::string& url)
{
    return etcd_family::config_of(url);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(etcd)

// The consensus scenarios, under etcd's names for the tool's case and the size limit's.
DLOCK_CONSENSUS_CASES(etcd_family, forced_release_is_seen_by_the_holder,
                      a_name_too_long_fails_at_once_and_status_tells_the_time_left)

// `etcdctl lock NAME -- cmd` and `dlock run --prefix '' NAME -- cmd` exclude each other: each
// section appends "in" and "out" lines to one file; no two sections may interleave.
BOOST_AUTO_TEST_CASE(interop_with_etcdctl_lock)
{
    etcd_cluster c;
    auto dir = temp_dir("dlock-etcd");
    std::string trace = dir + "/trace";
    // A section long enough that an overlap would show: in, 50 ms of work, out.
    std::string section = "echo \"in $0\" >> " + trace + "; sleep 0.05; echo \"out $0\" >> " + trace;
    std::vector<std::unique_ptr<child>> runs;
    for (int i = 0; i < 4; ++i) {
        runs.push_back(std::make_unique<child>(
            std::vector<std::string>{"/usr/bin/env", "ETCDCTL_API=3", "etcdctl", "--endpoints=" + c.endpoints_csv(),
                                     "lock", "shared", "--", "sh", "-c", section, "etcdctl" + std::to_string(i)}));
        runs.push_back(std::make_unique<child>(
            std::vector<std::string>{std::string(DLOCK_CLI_PATH), "run", "--url", c.url(), "--prefix", "", "--lease",
                                     "2s", "shared", "--", "sh", "-c", section, "dlock" + std::to_string(i)}));
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

// The waiter's connections (its watch among them) are cut mid-wait: it still gets the lock
// at the holder's release.
BOOST_AUTO_TEST_CASE(watch_cut_mid_wait_does_not_strand_the_waiter)
{
    etcd_cluster c;
    tcp_proxy proxy(c.client_port(0), false);
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
            notifier wake(io.get_executor());
            task_group tasks(io.get_executor());
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
