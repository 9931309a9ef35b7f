// SPDX-License-Identifier: BSL-1.0
// The consensus stores' scenarios, written once and run by etcd and ZooKeeper alike: each is
// a function template over a family F (consensus/etcd_family.hpp, consensus/zookeeper_family.hpp)
// that names the store, its cluster, the URL of a store whose session lasts so long, and the
// few things only the store can say (its words for an error, its own bad input). The
// per-store test files make them test cases with DLOCK_CONSENSUS_CASES (at the end).
#pragma once

#include <dlock/dlock.hpp>

#include "common/child.hpp"
#include "common/redis_server.hpp"  // redis_server, run_capture
#include "integration/cli_handoff.hpp"
#include "integration/consensus/support.hpp"
#include "integration/mutual_exclusion.hpp"
#include "integration/support.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/test/unit_test.hpp>

#include <signal.h>

#include <filesystem>
#include <string>
#include <vector>

namespace dlock::test::consensus {

namespace asio = boost::asio;
using namespace std::chrono_literals;
inline constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

/// Three processes, ten coroutines each, on one name: the count is exact, the fencing tokens
/// (etcd's create revisions, ZooKeeper's czxids) rise in lock order, and the processes took
/// turns more than once each.
template <class F>
void mutual_exclusion_across_processes()
{
    typename F::cluster c;
    auto dir = temp_dir();
    auto r = run_count_workers(F::url(c, 4s), "mx", 3, 10, 20, dir);  // 600 sections
    // More than the 2 switches of three processes taking turns once each: they interleaved.
    // (How often is timing: a process's local hand-offs may keep the name for a while; ZooKeeper
    // under ASan showed 3.)
    BOOST_TEST(r.switches > 2u, "process switches: " << r.switches);
    std::filesystem::remove_all(dir);
}

#ifdef DLOCK_CLI_PATH
/// Issue 29 item 2: a lock handed to another process (`dlock run`) is held for several
/// leases (sessions) to its end.
template <class F>
void a_lock_handed_to_another_run_is_held_to_its_end()
{
    typename F::cluster c(1);
    check_cli_handoff_then_long_hold(DLOCK_CLI_PATH, F::url(c, 2s), "handed");
}
#endif

/// A holder and a waiter (two stores: two sessions) while the leader is SIGKILLed: never two
/// holders; the holder keeps its lock or is told it lost it (a store whose sessions outlive an
/// election must keep it); the waiter proceeds with a larger token once the holder releases.
template <class F>
void leader_killed_while_held_and_waited()
{
    typename F::cluster c;
    asio::io_context io;
    typename F::store holder_store(io.get_executor(), F::config_of(F::url(c, 6s)));
    typename F::store waiter_store(io.get_executor(), F::config_of(F::url(c, 6s)));
    dlock::registry holder(holder_store, {.lease = 3s});
    dlock::registry waiter(waiter_store, {.lease = 3s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto g = co_await holder.obtain("job").acquire();
            auto first = g.fencing_token();
            bool released = false, waiter_got = false;
            std::uint64_t waiter_token = 0;
            notifier wake(io.get_executor());
            task_group tasks(io.get_executor());
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
            BOOST_REQUIRE(leader < c.size());
            BOOST_TEST_MESSAGE("killing leader " << leader);
            c.kill(leader);
            BOOST_TEST(c.wait_leader(30s));
            // Some time under the new leader: keep-alives move to a live member.
            asio::steady_timer t(io, 4s);
            co_await t.async_wait(asio::use_awaitable);
            BOOST_TEST((!waiter_got || g.is_lost()));
            BOOST_TEST_MESSAGE("holder lost: " << g.is_lost() << ", on " << F::whereabouts(holder_store));
            if (F::words.holder_outlives_an_election) {
                BOOST_TEST(!waiter_got);
                BOOST_TEST(!g.is_lost());
            }
            released = true;
            auto [ec] = co_await g.release(use_tuple);
            BOOST_TEST((!ec || ec == dlock::error::lock_lost), ec.message());
            if (F::words.holder_outlives_an_election)
                BOOST_TEST(!ec, ec.message());
            BOOST_TEST((co_await wake.wait([&] { return waiter_got; }, 30s)));
            BOOST_TEST(waiter_token > first);
            co_await tasks.join(10s);
            holder_store.close();
            waiter_store.close();
        },
        90s);
}

/// A holder SIGSTOPped past its lease (its session): another takes the lock with a larger
/// token, and the paused holder's key (node) is gone; on resume the holder learns it lost
/// (its own deadline passed with nothing confirmed).
template <class F>
void paused_holder_learns_of_loss_and_is_fenced()
{
    typename F::cluster c;
    child holder({worker_path(), "hold", F::url(c, 1s), "p", "1000"});
    auto line = holder.read_line();
    BOOST_REQUIRE((line && line->rfind("acquired ", 0) == 0));
    std::uint64_t old_token = std::stoull(line->substr(9));
    holder.signal(SIGSTOP);
    asio::io_context io;
    typename F::store store(io.get_executor(), F::config_of(F::url(c, 4s)));
    dlock::registry reg(store, {.lease = 2s});
    std::uint64_t new_token = 0;
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto g = co_await reg.obtain("p").acquire_for(20s);
            new_token = g.fencing_token();
            auto s = co_await store.async_status("dlock:p", asio::use_awaitable);
            BOOST_TEST(s.queued == 0u);  // the paused holder's key went with its lease
            BOOST_TEST(s.fencing_token == new_token);
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

/// With 2 of 3 members down nothing can be granted: a bounded acquire fails in bounded time
/// with an error that says why; once they return, the lock works again.
template <class F>
void quorum_lost_fails_in_bounded_time()
{
    typename F::cluster c;
    asio::io_context io;
    typename F::store store(io.get_executor(), F::short_requests(c));
    dlock::registry reg(store, {.lease = 2s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto warm = co_await reg.obtain("q0").acquire();
            co_await warm.release();
            c.kill(0);
            c.kill(1);
            auto t0 = std::chrono::steady_clock::now();
            auto [ec, g] = co_await reg.obtain("q").acquire_for(3s, use_tuple);
            auto took = std::chrono::steady_clock::now() - t0;
            BOOST_TEST(!!ec);
            BOOST_TEST(!g);
            BOOST_TEST_MESSAGE("quorum lost: " << ec.message() << " / " << store.last_error_text());
            BOOST_TEST((took < 10s));
            c.start(0);
            c.start(1);
            BOOST_TEST(c.wait_leader(30s));
            // A request that timed out for us may still commit once the quorum is back: its
            // key then holds the name for nobody until the lease we gave up on ends.
            // (A look only: a store still reconnecting may answer with an error.)
            auto [es, s] = co_await store.async_status("dlock:q", use_tuple);
            BOOST_TEST_MESSAGE("after recovery: " << es.message() << ", held " << s.held << ", key " << s.key
                                                  << ", leader " << c.leader() << ", store on "
                                                  << F::whereabouts(store));
            auto [ec2, again] = co_await reg.obtain("q").acquire_for(30s, use_tuple);
            BOOST_TEST(!ec2, ec2.message() << " / " << store.last_error_text());
            if (again)
                co_await again.release();
            store.close();
        },
        90s);
}

/// Issue 29, items 7 and 8: a 1 MiB name (a registry with a raised max_name_length lets it
/// through) makes a request over the servers' limits: a permanent error at once, whose text
/// names the limit, not a connection retried until the acquire's bound. status() tells a
/// holder's time left, to its own store (and to another, where the store can know it).
template <class F>
void a_name_too_long_fails_at_once_and_status_tells_the_time_left()
{
    typename F::cluster c(1);
    asio::io_context io;
    typename F::store store(io.get_executor(), F::config_of(F::url(c, 4s)));
    typename F::store other(io.get_executor(), F::config_of(F::url(c, 4s)));
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            co_await F::refuses_sessions_it_cannot_have(c);
            // The store's first lease sets its session's (etcd's lease is the store's).
            const auto lease = F::words.time_left_lease;
            std::string big(1 << 20, 'n');
            auto [e1, r1] = co_await store.async_try_acquire(big, "t", lease, use_tuple);
            BOOST_TEST((e1 == F::words.too_big), e1.message() << " / " << store.last_error_text());
            BOOST_TEST(!dlock::is_transient(e1));
            BOOST_TEST(store.last_error_text().find(F::words.too_big_text) != std::string::npos,
                       store.last_error_text());
            dlock::registry reg(store, {.lease = lease, .max_name_length = 2 << 20});
            auto [e2, g2] = co_await reg.obtain(big).acquire_for(10s, use_tuple);
            BOOST_TEST((e2 == F::words.too_big), e2.message());
            // One holds; the holder's store (and another) read the time left.
            auto g = co_await reg.obtain("left").acquire();
            for (auto* st : {&store, &other}) {
                if (st == &other && !F::words.others_see_time_left)
                    break;
                auto s = co_await st->async_status("dlock:left", asio::use_awaitable);
                BOOST_TEST(s.held);
                BOOST_TEST((s.ttl.count() > F::words.time_left_above && s.ttl.count() <= F::words.time_left_at_most),
                           s.ttl.count());
            }
            co_await g.release();
            store.close();
            other.close();
        },
        60s);
}

/// Bad input, each a clear error and nothing hangs: a URL's bad port, a server that speaks
/// something else (a Redis), and what only the family can be given wrong.
template <class F>
void bad_input_is_a_clear_error()
{
    {
        typename F::config cfg;
        typename F::config_error err;
        BOOST_TEST(!F::parse_url(F::scheme + std::string("://127.0.0.1:notaport"), cfg, err));
        BOOST_TEST((err.code == dlock::error::invalid_port));
    }
    typename F::cluster c(1);
    redis_server redis;  // a server that is not the store
    asio::io_context io;
    typename F::store store(io.get_executor(), F::config_of(F::url(c, 4s)));
    typename F::store wrong(io.get_executor(), F::config_of(F::not_the_store_url(redis.port())));
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto t0 = std::chrono::steady_clock::now();
            auto [e1, r1] = co_await wrong.async_try_acquire("b", "t", 2s, use_tuple);
            BOOST_TEST((e1 == F::words.not_the_store), wrong.describe() << ": " << e1.message());
            BOOST_TEST(dlock::is_transient(e1) == F::words.not_the_store_is_transient);
            BOOST_TEST((std::chrono::steady_clock::now() - t0 < 6s));
            BOOST_TEST(wrong.last_error_text().find(F::words.not_the_store_text) != std::string::npos,
                       wrong.last_error_text());
            co_await F::refuses_its_own_bad_input(c, store);
            store.close();
            wrong.close();
        },
        60s);
}

#ifdef DLOCK_CLI_PATH
/// The tool on the store: `dlock run` runs under the lock, `status` shows the holder and its
/// token, and `release --force` deletes the holder's key, which its watchdog then notices.
template <class F>
void the_tool_runs_reports_and_forces_a_release()
{
    typename F::cluster c;
    const std::string cli = DLOCK_CLI_PATH;
    int status = -1;
    auto out = run_capture({cli, "run", "--url", F::url(c), "tool", "--", "sh", "-c", "echo ran"}, &status);
    BOOST_TEST(status == 0, out);
    BOOST_TEST(out.find("ran") != std::string::npos, out);
    asio::io_context io;
    typename F::store store(io.get_executor(), F::config_of(F::url(c, 4s)));
    dlock::registry reg(store, {.lease = 3s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto g = co_await reg.obtain("f").acquire();
            auto st = run_capture({cli, "status", "--json", "--url", F::url(c), "f"}, &status);
            BOOST_TEST(status == 0, st);
            BOOST_TEST(st.find("\"held\":true") != std::string::npos, st);
            BOOST_TEST(st.find("\"fencing_token\":" + std::to_string(g.fencing_token())) != std::string::npos, st);
            auto rel = run_capture({cli, "release", "--force", "--url", F::url(c), "f"}, &status);
            BOOST_TEST(status == 0, rel);
            co_await expect_forced_loss(g);
            store.close();
        },
        60s);
}
#endif

}  // namespace dlock::test::consensus

// The scenarios as a store's test cases. Every name is the one both stores' suites gave the
// case before it was shared, but for the tool's and the size limit's (each store keeps its own,
// so that Boost's and ctest's names stay as they were).
#define DLOCK_CONSENSUS_CASE(F, name, scenario)                                                                        \
    BOOST_AUTO_TEST_CASE(name)                                                                                         \
    {                                                                                                                  \
        dlock::test::consensus::scenario<F>();                                                                         \
    }

#ifdef DLOCK_CLI_PATH
#define DLOCK_CONSENSUS_TOOL_CASES(F, tool)                                                                            \
    DLOCK_CONSENSUS_CASE(F, a_lock_handed_to_another_run_is_held_to_its_end,                                           \
                         a_lock_handed_to_another_run_is_held_to_its_end)                                              \
    DLOCK_CONSENSUS_CASE(F, tool, the_tool_runs_reports_and_forces_a_release)
#else
#define DLOCK_CONSENSUS_TOOL_CASES(F, tool)
#endif

#define DLOCK_CONSENSUS_CASES(F, tool, too_long)                                                                       \
    DLOCK_CONSENSUS_CASE(F, mutual_exclusion_across_processes, mutual_exclusion_across_processes)                      \
    DLOCK_CONSENSUS_CASE(F, leader_killed_while_held_and_waited, leader_killed_while_held_and_waited)                  \
    DLOCK_CONSENSUS_CASE(F, paused_holder_learns_of_loss_and_is_fenced, paused_holder_learns_of_loss_and_is_fenced)    \
    DLOCK_CONSENSUS_CASE(F, quorum_lost_fails_in_bounded_time, quorum_lost_fails_in_bounded_time)                      \
    DLOCK_CONSENSUS_CASE(F, too_long, a_name_too_long_fails_at_once_and_status_tells_the_time_left)                    \
    DLOCK_CONSENSUS_CASE(F, bad_input_is_a_clear_error, bad_input_is_a_clear_error)                                    \
    DLOCK_CONSENSUS_TOOL_CASES(F, tool)
