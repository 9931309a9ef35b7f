// SPDX-License-Identifier: BSL-1.0
// The lock against real redis-server processes, with real worker processes.
#include <dlock/dlock.hpp>

#include "common/child.hpp"
#include "common/redis_server.hpp"
#include "common/scratch_dir.hpp"
#include "integration/lock_test_util.hpp"
#include "integration/mutual_exclusion.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <signal.h>

#include <fstream>
#include <map>
#include <sstream>

using namespace asio::experimental::awaitable_operators;
using boost::system::error_code;
using dlock::test::eventually;
using dlock::test::key_count;
using dlock::test::spawn;


BOOST_AUTO_TEST_SUITE(lock_suite)

BOOST_AUTO_TEST_CASE(mutual_exclusion_across_processes)
{
    dlock::test::redis_server srv;
    const std::string dir = dlock::test::scratch_dir("dlock-mx");
    constexpr int processes = 4, coroutines = 50, sections = 100;  // 20,000 sections
    // The log is written inside the critical section: in file order, fencing tokens never
    // go down, and a token belongs to one process only.
    auto r =
        dlock::test::run_count_workers(std::to_string(srv.port()), "mx", processes, coroutines, sections, dir, 240s);
    // Steady progress for everyone: the lock changed process many times, not once per process.
    BOOST_TEST(r.switches > 100u, "process switches: " << r.switches);
}

BOOST_AUTO_TEST_CASE(killed_holder_frees_after_lease)
{
    dlock::test::redis_server srv;
    dlock::test::child holder({dlock::test::worker_path(), "hold", std::to_string(srv.port()), "k", "1000"});
    auto line = holder.read_line();
    BOOST_REQUIRE((line && line->rfind("acquired", 0) == 0));
    holder.signal(SIGKILL);
    auto killed_at = clock_type::now();
    holder.wait();

    asio::io_context io;
    dlock::redis_store store(io.get_executor(), srv.config());
    dlock::registry reg(store, {.lease = 1s});
    error_code ec;
    clock_type::duration waited{};
    spawn(io, [&]() -> asio::awaitable<void> {
        auto g = co_await reg.obtain("k").acquire_for(5s, asio::redirect_error(asio::use_awaitable, ec));
        waited = clock_type::now() - killed_at;
        BOOST_TEST(g.owns_lock());
        co_await g.release();
        store.close();
    });
    io.run_for(20s);
    BOOST_TEST(!ec);
    // Within the lease (1 s) plus a margin for PTTL rounding and scheduling.
    BOOST_TEST(waited < 1500ms,
               "waited " << std::chrono::duration_cast<std::chrono::milliseconds>(waited).count() << " ms");
}

BOOST_AUTO_TEST_CASE(paused_holder_learns_of_loss_and_is_fenced)
{
    dlock::test::redis_server srv;
    dlock::test::child holder({dlock::test::worker_path(), "hold", std::to_string(srv.port()), "p", "600"});
    auto line = holder.read_line();
    BOOST_REQUIRE((line && line->rfind("acquired ", 0) == 0));
    std::uint64_t old_token = std::stoull(line->substr(9));
    holder.signal(SIGSTOP);

    // Another owner gets the lock once the paused holder's lease has run out.
    asio::io_context io;
    dlock::redis_store store(io.get_executor(), srv.config());
    dlock::registry reg(store, {.lease = 5s});
    std::uint64_t new_token = 0;
    spawn(io, [&]() -> asio::awaitable<void> {
        auto g = co_await reg.obtain("p").acquire_for(10s);
        new_token = g.fencing_token();
        holder.signal(SIGCONT);  // resumed while we hold: it must find out it lost
        auto result = holder.read_line(20s);
        BOOST_REQUIRE(result.has_value());
        BOOST_TEST(*result == "lost=1 token=" + std::to_string(old_token));
        co_await g.release();
        store.close();
    });
    io.run_for(30s);
    BOOST_TEST(new_token > old_token);
    BOOST_TEST(holder.wait() == 0);
}

BOOST_AUTO_TEST_CASE(redis_restart_while_held_and_awaited)
{
    dlock::test::server_options opts;
    opts.appendonly = true;  // the lease and the fencing counter survive the restart
    dlock::test::redis_server srv(opts);
    asio::io_context io;
    dlock::redis_store store_a(io.get_executor(), srv.config());  // two stores: two "processes"
    dlock::redis_store store_b(io.get_executor(), srv.config());
    auto t_start = clock_type::now();
    dlock::registry a(
        store_a, {.lease = 2s, .on_event = [&](const dlock::lock_event& ev) {
                      auto& cs = store_a.connection().stats();
                      BOOST_TEST_MESSAGE(
                          "a event "
                          << int(ev.kind) << " at "
                          << std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t_start).count()
                          << " connects=" << cs.connects << " failures=" << cs.connect_failures
                          << " requests=" << cs.requests << " batches=" << cs.batches
                          << " connected=" << store_a.connection().is_connected());
                  }});
    dlock::registry b(store_b, {.lease = 2s});
    clock_type::time_point a_released{}, b_acquired{};
    std::uint64_t a_token = 0, b_token = 0;
    bool a_lost = true, waiter_ok = false;
    int b_done = 0;
    spawn(io, [&]() -> asio::awaitable<void> {
        auto g = co_await a.obtain("r").acquire();
        a_token = g.fencing_token();
        // Waiters in the other "process" queue up and subscribe.
        for (int i = 0; i < 3; ++i) {
            spawn(io, [&]() -> asio::awaitable<void> {
                auto gb = co_await b.obtain("r").acquire_for(20s);
                if (b_acquired == clock_type::time_point{})
                    b_acquired = clock_type::now();
                b_token = gb.fencing_token();
                co_await gb.release();
                if (++b_done == 3)
                    waiter_ok = true;
            });
        }
        // The waiters' one watch: the name's channel and the wait token's grant channel.
        BOOST_TEST(co_await eventually([&] { return store_b.subscriber().channel_count() == 2; }));
        BOOST_TEST_MESSAGE(
            "restart at "
            << std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t_start).count());
        srv.restart();
        BOOST_TEST_MESSAGE(
            "restarted at "
            << std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t_start).count());
        // Keep holding across the restart: renewals resume on the new connection.
        BOOST_TEST(co_await eventually([&] { return a.stats().renewals >= 2; }, 15s));
        a_lost = g.is_lost();
        a_released = clock_type::now();
        co_await g.release();
        BOOST_TEST(co_await eventually([&] { return waiter_ok; }, 20s));
        store_a.close();
        store_b.close();
    });
    io.run_for(60s);
    BOOST_TEST(!a_lost);
    BOOST_TEST(waiter_ok);
    BOOST_TEST((b_acquired > a_released));  // no overlap
    BOOST_TEST(b_token > a_token);
}

BOOST_AUTO_TEST_CASE(watchdog_keeps_lease_through_long_section)
{
    dlock::test::redis_server srv;
    asio::io_context io;
    dlock::redis_store store(io.get_executor(), srv.config());
    dlock::registry with_dog(store, {.lease = 2s});
    dlock::registry fixed(store, {.lease = 2s, .watchdog = false});
    error_code kept, expired;
    std::string ttl_mid;
    spawn(io, [&]() -> asio::awaitable<void> {
        auto g = co_await with_dog.obtain("long").acquire();
        asio::steady_timer t(io, 10s);
        co_await t.async_wait(asio::use_awaitable);
        BOOST_TEST(!g.is_lost());
        co_await g.release(asio::redirect_error(asio::use_awaitable, kept));

        auto f = co_await fixed.obtain("short").acquire();
        t.expires_after(3s);
        co_await t.async_wait(asio::use_awaitable);
        BOOST_TEST(f.is_lost());
        co_await f.release(asio::redirect_error(asio::use_awaitable, expired));
        store.close();
    });
    io.run_for(30s);
    BOOST_TEST(!kept);
    BOOST_TEST(with_dog.stats().renewals >= 10u);
    BOOST_TEST(expired == dlock::error::lock_lost);
}

BOOST_AUTO_TEST_CASE(cancellation_at_every_stage_leaves_nothing)
{
    dlock::test::redis_server srv;
    asio::io_context io;
    dlock::redis_store store_a(io.get_executor(), srv.config());
    dlock::redis_store store_b(io.get_executor(), srv.config());
    dlock::registry a(store_a, {.lease = 5s});
    dlock::registry b(store_b, {.lease = 5s});
    int aborted = 0;
    spawn(io, [&]() -> asio::awaitable<void> {
        auto cancel_after = [&](dlock::registry& reg, std::chrono::milliseconds d) -> asio::awaitable<void> {
            asio::steady_timer t(io, d);
            auto r = co_await (reg.obtain("c").acquire(asio::use_awaitable) || t.async_wait(asio::use_awaitable));
            aborted += r.index() == 1;
        };
        // 1. Mid-request: cancelled before the store's reply can have arrived.
        co_await cancel_after(b, 0ms);
        BOOST_TEST(co_await eventually([&] { return b.size() == 0; }));
        BOOST_TEST(key_count(srv, "*:lock:*") == "0");

        auto g = co_await a.obtain("c").acquire();
        // 2. Waiting on the store (held by the other registry): subscribed, then cancelled.
        co_await cancel_after(b, 100ms);
        // 3. Queued locally behind a local holder.
        co_await cancel_after(a, 20ms);
        BOOST_TEST(co_await eventually([&] { return b.size() == 0 && store_b.subscriber().channel_count() == 0; }));
        BOOST_TEST(srv.cli({"PUBSUB", "NUMSUB", store_b.channel("dlock:c")}).find("\n0") != std::string::npos);
        // The cancelled store waiter took its token off the server's queue.
        BOOST_TEST(co_await eventually([&] { return key_count(srv, "*:queue*") == "0"; }));
        co_await g.release();
        BOOST_TEST(co_await eventually([&] { return a.size() == 0; }));
        BOOST_TEST(key_count(srv, "*:lock:*") == "0");
        store_a.close();
        store_b.close();
    });
    io.run_for(30s);
    BOOST_TEST(aborted == 3);
    BOOST_TEST(a.stats().cancelled + b.stats().cancelled == 3u);
}

// The release hands the name straight to the queued waiter of another client: no retry.
BOOST_AUTO_TEST_CASE(cross_process_handoff_is_direct)
{
    dlock::test::redis_server srv;
    asio::io_context io;
    dlock::redis_store store_a(io.get_executor(), srv.config());
    dlock::redis_store store_b(io.get_executor(), srv.config());
    dlock::registry a(store_a, {.lease = 30s});
    dlock::registry b(store_b, {.lease = 30s});
    clock_type::duration handoff{};
    std::uint64_t fence_a = 0, fence_b = 0;
    spawn(io, [&]() -> asio::awaitable<void> {
        auto g = co_await a.obtain("n").acquire();
        fence_a = g.fencing_token();
        bool got = false;
        spawn(io, [&]() -> asio::awaitable<void> {
            auto gb = co_await b.obtain("n").acquire();
            fence_b = gb.fencing_token();
            co_await gb.release();
            got = true;
        });
        // Queued at the server, so the release below must hand the name over itself.
        BOOST_TEST(co_await eventually([&] { return srv.cli({"LLEN", store_b.queue_key("dlock:n")}) == "1"; }));
        auto t0 = clock_type::now();
        co_await g.release();
        BOOST_TEST(co_await eventually([&] { return got; }));
        handoff = clock_type::now() - t0;
        store_a.close();
        store_b.close();
    });
    io.run_for(30s);
    // With a 30 s lease, anything but a notification would take seconds.
    BOOST_TEST(b.stats().store_handoffs == 1u);
    BOOST_TEST(b.stats().woken_by_notification >= 1u);
    BOOST_TEST(b.stats().woken_by_timer == 0u);
    BOOST_TEST(fence_b == fence_a + 1);
    BOOST_TEST(handoff < 5s);
    BOOST_TEST(key_count(srv, "*:queue*") == "0");
    BOOST_TEST(key_count(srv, "*:lock:*") == "0");
}

BOOST_AUTO_TEST_CASE(thousands_of_local_waiters_hand_off_without_deep_stacks)
{
    dlock::test::redis_server srv;
    asio::io_context io;
    dlock::redis_store store(io.get_executor(), srv.config());
    dlock::registry reg(store, {.lease = 10s});
    constexpr int waiters = 5000;
    int inside = 0, max_inside = 0, done = 0;
    for (int i = 0; i < waiters; ++i) {
        spawn(io, [&]() -> asio::awaitable<void> {
            auto g = co_await reg.obtain("crowd").acquire();
            max_inside = std::max(max_inside, ++inside);
            --inside;
            co_await g.release();
            if (++done == waiters)
                store.close();
        });
    }
    io.run_for(60s);
    BOOST_TEST(done == waiters);
    BOOST_TEST(max_inside == 1);
    BOOST_TEST(reg.stats().handed_off >= static_cast<std::uint64_t>(waiters / 2));
}

BOOST_AUTO_TEST_CASE(reply_after_the_lease_end_is_not_a_lock)
{
    dlock::test::redis_server srv;
    asio::io_context io;
    dlock::redis_store store(io.get_executor(), srv.config());
    dlock::registry reg(store, {.lease = 20ms, .watchdog = false});
    std::uint64_t token = 0;
    spawn(io, [&]() -> asio::awaitable<void> {
        co_await store.connection().async_connect();
        // The server stalls past the lease while the first attempt is in flight: its reply
        // (a granted lease) comes too late to be trusted, so it is released and retried.
        srv.pause();
        asio::steady_timer stall(io, 100ms);
        spawn(io, [&]() -> asio::awaitable<void> {
            co_await stall.async_wait(asio::use_awaitable);
            srv.resume();
        });
        error_code ignored;
        auto g = co_await reg.obtain("late").acquire_for(5s);
        token = g.fencing_token();
        co_await g.release(asio::redirect_error(asio::use_awaitable, ignored));
        store.close();
    });
    io.run_for(20s);
    BOOST_TEST(reg.stats().late_replies >= 1u);
    BOOST_TEST(token >= 2u);  // the late lease (token 1) was not handed out
}

BOOST_AUTO_TEST_SUITE_END()
