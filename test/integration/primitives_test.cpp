// SPDX-License-Identifier: BSL-1.0
// Read-write locks and semaphores against a real redis-server, with real worker processes.
#include <dlock/dlock.hpp>

#include "common/child.hpp"
#include "common/redis_server.hpp"
#include "common/scratch_dir.hpp"
#include "integration/lock_test_util.hpp"
#include "integration/rw_scenarios.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <signal.h>

#include <fstream>
#include <memory>

using boost::system::error_code;
using dlock::test::child;
using dlock::test::expect_done;
using dlock::test::key_count;
using dlock::test::spawn;
using dlock::test::worker_path;

namespace {

std::string temp_dir()
{
    return dlock::test::scratch_dir("dlock-prim");
}

std::unique_ptr<child> sections(const dlock::test::redis_server& srv, const std::string& name, const std::string& what,
                                int coroutines, int n, int hold_ms, const std::string& log)
{
    return dlock::test::rw::sections(std::to_string(srv.port()), name, what, coroutines, n, hold_ms, log);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(primitives)

BOOST_AUTO_TEST_CASE(readers_share_writers_exclude_across_processes)
{
    dlock::test::redis_server srv;
    dlock::test::rw::readers_share_writers_exclude(std::to_string(srv.port()), temp_dir() + "/log");
    // Only the fencing counter is left.
    BOOST_TEST(key_count(srv, "*") == "1", srv.cli({"KEYS", "*"}) << " / " << srv.cli({"SCAN", "0", "TYPE", "zset"}));
}

// Two processes hold the read side at once (each waits for nothing but its own grant); a
// writer is then refused until both are gone.
BOOST_AUTO_TEST_CASE(readers_of_two_processes_hold_at_once)
{
    dlock::test::redis_server srv;
    child a({worker_path(), "hold", std::to_string(srv.port()), "shared", "5000", "read"});
    auto line = a.read_line();
    BOOST_REQUIRE((line && line->rfind("acquired", 0) == 0));
    child b({worker_path(), "hold", std::to_string(srv.port()), "shared", "5000", "read"});
    line = b.read_line();
    BOOST_REQUIRE((line && line->rfind("acquired", 0) == 0));  // while a still holds
    asio::io_context io;
    dlock::redis_store store(io.get_executor(), srv.config());
    dlock::registry reg(store, {.lease = 5s});
    bool writer_refused = false;
    dlock::lock_status st;
    spawn(io, [&]() -> asio::awaitable<void> {
        auto w = co_await reg.obtain_rw("shared").write().try_acquire();
        writer_refused = !w;
        st = co_await store.async_status("dlock:shared", asio::use_awaitable);
        store.close();
    });
    io.run_for(20s);
    BOOST_TEST(writer_refused);
    BOOST_TEST(st.holders == 2u);
    BOOST_TEST(!st.writer);
}

BOOST_AUTO_TEST_CASE(a_writer_gets_in_while_readers_keep_arriving)
{
    dlock::test::redis_server srv;
    dlock::test::rw::a_writer_gets_in_while_readers_keep_arriving(std::to_string(srv.port()), temp_dir() + "/log");
}

BOOST_AUTO_TEST_CASE(a_semaphore_never_exceeds_its_permits)
{
    dlock::test::redis_server srv;
    auto log = temp_dir() + "/log";
    std::vector<std::unique_ptr<child>> ws;
    for (int p = 0; p < 3; ++p)
        ws.push_back(sections(srv, "sem", "permits=3", 4, 15, 5, log));
    for (auto& w : ws)
        expect_done(*w);
    auto r = dlock::test::read_sections_log(log);
    BOOST_TEST(r.begins == 3u * 4 * 15);
    BOOST_TEST(r.well_formed);
    BOOST_TEST(r.tokens_unique);
    BOOST_TEST(r.max_inside <= 3u, "most permits held at once: " << r.max_inside);
    BOOST_TEST(r.max_inside == 3u, "all 3 permits were in use at some point: " << r.max_inside);
    BOOST_TEST(key_count(srv, "*") == "1");
}

BOOST_AUTO_TEST_CASE(a_killed_holders_permit_comes_back)
{
    dlock::test::redis_server srv;
    asio::io_context io;
    dlock::redis_store store(io.get_executor(), srv.config());
    dlock::test::rw::a_killed_holders_permit_comes_back(std::to_string(srv.port()), io, store);
}

BOOST_AUTO_TEST_CASE(a_paused_holder_learns_its_permit_is_lost)
{
    dlock::test::redis_server srv;
    child holder({worker_path(), "hold", std::to_string(srv.port()), "p", "600", "permits=1"});
    auto line = holder.read_line();
    BOOST_REQUIRE((line && line->rfind("acquired ", 0) == 0));
    std::uint64_t old_token = std::stoull(line->substr(9));
    holder.signal(SIGSTOP);
    asio::io_context io;
    dlock::redis_store store(io.get_executor(), srv.config());
    dlock::registry reg(store, {.lease = 5s});
    std::uint64_t new_token = 0;
    spawn(io, [&]() -> asio::awaitable<void> {
        auto g = co_await reg.obtain_semaphore("p", 1).acquire_for(10s);
        new_token = g.fencing_token();
        holder.signal(SIGCONT);
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

BOOST_AUTO_TEST_CASE(cancelled_waiters_leave_nothing_behind)
{
    dlock::test::redis_server srv;
    asio::io_context io;
    dlock::redis_store store(io.get_executor(), srv.config());
    dlock::registry holder_reg(store, {.lease = 5s});
    dlock::registry waiter_reg(store, {.lease = 5s});  // another registry: another process's view
    std::size_t queued_while_waiting = 0, holders_while_held = 0;
    unsigned available_while_held = 99;
    bool writer_seen = false;
    spawn(io, [&]() -> asio::awaitable<void> {
        auto w = co_await holder_reg.obtain_rw("c").write().acquire();
        auto p = co_await holder_reg.obtain_semaphore("s", 1).acquire();
        // Each waiter queues at the store, then is cancelled.
        asio::cancellation_signal stop_r, stop_p;
        error_code ec_r, ec_p;
        int ended = 0;
        auto rw = waiter_reg.obtain_rw("c");
        auto sem = waiter_reg.obtain_semaphore("s", 1);
        rw.read().acquire(asio::bind_cancellation_slot(stop_r.slot(), [&](error_code ec, dlock::guard) {
            ec_r = ec;
            ++ended;
        }));
        sem.acquire(asio::bind_cancellation_slot(stop_p.slot(), [&](error_code ec, dlock::guard) {
            ec_p = ec;
            ++ended;
        }));
        bool queued = co_await dlock::test::eventually(
            [&] { return key_count(srv, "*squeue:dlock:c") == "1" && key_count(srv, "*squeue:dlock:s") == "1"; }, 10s);
        BOOST_TEST(queued);
        auto st = co_await store.async_status("dlock:c");
        available_while_held = co_await sem.available();
        queued_while_waiting = st.queued;
        holders_while_held = st.holders;
        writer_seen = st.writer;
        stop_r.emit(asio::cancellation_type::terminal);
        stop_p.emit(asio::cancellation_type::terminal);
        co_await dlock::test::eventually([&] { return ended == 2; });
        BOOST_TEST(ec_r == asio::error::operation_aborted);
        BOOST_TEST(ec_p == asio::error::operation_aborted);
        co_await w.release();
        co_await p.release();
        co_await waiter_reg.async_drain();
        co_await holder_reg.async_drain();
        store.close();
    });
    io.run_for(30s);
    BOOST_TEST(queued_while_waiting == 1u);
    BOOST_TEST(holders_while_held == 1u);
    BOOST_TEST(available_while_held == 0u);
    BOOST_TEST(writer_seen);
    // Only the fencing counters (one per slot tag) are left.
    BOOST_TEST(key_count(srv, "*") == key_count(srv, "*:fence"),
               srv.cli({"EVAL", "return table.concat(redis.call('KEYS', '*'), ' ')", "0"}));
    BOOST_TEST(srv.cli({"EVAL", "return #redis.call('PUBSUB', 'CHANNELS', '*')", "0"}) == "0");
}

BOOST_AUTO_TEST_CASE(bad_input_is_a_clear_error)
{
    dlock::test::redis_server srv;
    asio::io_context io;
    dlock::redis_store store(io.get_executor(), srv.config());
    dlock::registry a(store, {.lease = 5s});
    dlock::registry b(store, {.lease = 5s});
    error_code zero, mismatch, as_rw, local_mismatch, too_long, as_sem;
    spawn(io, [&]() -> asio::awaitable<void> {
        co_await a.obtain_semaphore("z", 0).acquire(asio::redirect_error(asio::use_awaitable, zero));
        auto g = co_await a.obtain_semaphore("n", 2).acquire();
        co_await b.obtain_semaphore("n", 3).try_acquire(asio::redirect_error(asio::use_awaitable, mismatch));
        co_await b.obtain_rw("n").read().try_acquire(asio::redirect_error(asio::use_awaitable, as_rw));
        co_await a.obtain_semaphore("n", 5).acquire(asio::redirect_error(asio::use_awaitable, local_mismatch));
        auto w = co_await a.obtain_rw("rw").write().acquire();
        co_await b.obtain_semaphore("rw", 1).try_acquire(asio::redirect_error(asio::use_awaitable, as_sem));
        co_await a.obtain_rw(std::string(100'000, 'x'))
            .read()
            .acquire(asio::redirect_error(asio::use_awaitable, too_long));
        auto st = co_await store.async_status("dlock:n");
        BOOST_TEST(st.capacity == 2u);
        BOOST_TEST(st.holders == 1u);
        BOOST_TEST((st.kind == dlock::lease_kind::permit));
        co_await g.release();
        co_await w.release();
        store.close();
    });
    io.run_for(20s);
    BOOST_TEST(zero == dlock::error::invalid_option);
    BOOST_TEST(mismatch == dlock::error::kind_mismatch);
    BOOST_TEST(as_rw == dlock::error::kind_mismatch);
    BOOST_TEST(local_mismatch == dlock::error::kind_mismatch);
    BOOST_TEST(as_sem == dlock::error::kind_mismatch);
    BOOST_TEST(too_long == dlock::error::invalid_name);
}

BOOST_AUTO_TEST_SUITE_END()
