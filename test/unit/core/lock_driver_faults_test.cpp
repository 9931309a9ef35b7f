// SPDX-License-Identifier: BSL-1.0
// The driver's answers to faults and odd input, on the memory store: errors that stop,
// transient ones that are retried, bounds that overflow, loss during a pause, misuse.
#include <dlock/error.hpp>
#include <dlock/memory_store.hpp>
#include <dlock/registry.hpp>

#include "unit/memory_fixture.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <thread>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using boost::system::error_code;

namespace {

using fixture = dlock::test::memory_fixture;

}  // namespace

BOOST_FIXTURE_TEST_SUITE(lock_driver_faults_suite, fixture)

// A refusal (an ACL without EVAL, a key of the wrong type) fails the acquire at once, with
// the server's text kept apart for the caller; it is not retried.
BOOST_AUTO_TEST_CASE(a_permanent_store_error_fails_the_waiting_acquire)
{
    dlock::registry reg(store, {.lease = 5s});
    auto lk = reg.obtain("x");
    store.fail_next(dlock::error::permission_denied,
                    "NOPERM this user has no permissions to run the 'evalsha' command");
    error_code ec;
    bool done = false;
    spawn([&]() -> asio::awaitable<void> {
        auto g = co_await lk.acquire(asio::redirect_error(asio::use_awaitable, ec));
        done = true;
        BOOST_TEST(!g);
    });
    run(5s);
    BOOST_TEST(done);
    BOOST_TEST(ec == dlock::error::permission_denied);
    BOOST_TEST(lk.diagnostics().find("evalsha") != std::string::npos);
    BOOST_TEST(reg.stats().store_errors == 1u);
    BOOST_TEST(store.size() == 0u);
}

BOOST_AUTO_TEST_CASE(wrong_type_fails_every_waiter_of_the_name)
{
    dlock::registry reg(store, {.lease = 5s});
    store.fail_next(dlock::error::wrong_type, "WRONGTYPE Operation against a key holding the wrong kind of value");
    std::vector<error_code> errs(3);
    for (auto& e : errs)
        spawn([&]() -> asio::awaitable<void> {
            co_await reg.obtain("x").acquire(asio::redirect_error(asio::use_awaitable, e));
        });
    run(5s);
    for (auto& e : errs)
        BOOST_TEST(e == dlock::error::wrong_type);
}

// A transient error (connection lost, server loading) is retried: the acquire succeeds.
BOOST_AUTO_TEST_CASE(a_transient_store_error_is_retried)
{
    dlock::registry reg(store, {.lease = 5s});
    store.fail_next(dlock::error::server_busy, "LOADING Redis is loading the dataset in memory", 2);
    std::uint64_t fence = 0;
    spawn([&]() -> asio::awaitable<void> {
        auto g = co_await reg.obtain("x").acquire();
        fence = g.fencing_token();
        co_await g.release();
    });
    run(5s);
    BOOST_TEST(fence > 0u);
    BOOST_TEST(reg.stats().store_errors == 2u);
}

// A release that meets a transient error is asked again; it does not report lock_lost.
BOOST_AUTO_TEST_CASE(a_release_that_meets_a_transient_error_is_retried)
{
    dlock::registry reg(store, {.lease = 5s});
    error_code rel = dlock::error::timeout;
    spawn([&]() -> asio::awaitable<void> {
        auto g = co_await reg.obtain("x").acquire();
        store.fail_next(dlock::error::server_busy, "LOADING", 2);
        co_await g.release(asio::redirect_error(asio::use_awaitable, rel));
    });
    run(5s);
    BOOST_TEST(!rel);
    BOOST_TEST(store.size() == 0u);
}

// A lease no store can set is refused before anything is sent, not retried forever.
BOOST_AUTO_TEST_CASE(a_huge_lease_is_refused_at_once)
{
    dlock::registry reg(store, {.lease = std::chrono::milliseconds::max()});
    error_code ec;
    spawn([&]() -> asio::awaitable<void> {
        co_await reg.obtain("x").acquire(asio::redirect_error(asio::use_awaitable, ec));
    });
    run(5s);
    BOOST_TEST(ec == dlock::error::invalid_lease);
    BOOST_TEST(reg.stats().store_errors == 0u);
}

// Bounds too large for the clock mean "no bound", not "already passed"; a zero bound still
// makes one attempt (as tryLock(0) does in Java and Redisson).
BOOST_AUTO_TEST_CASE(acquire_for_bounds_saturate_and_zero_tries_once)
{
    dlock::registry reg(store, {.lease = 5s});
    std::vector<error_code> errs(4, dlock::error::not_held);
    std::vector<bool> held(4);
    spawn([&]() -> asio::awaitable<void> {
        auto lk = reg.obtain("x");
        auto g0 = co_await lk.acquire_for(std::chrono::milliseconds::max(),
                                          asio::redirect_error(asio::use_awaitable, errs[0]));
        held[0] = bool(g0);
        co_await g0.release();
        auto g1 = co_await lk.acquire_for(std::chrono::duration_cast<std::chrono::milliseconds>(3'000'000h),
                                          asio::redirect_error(asio::use_awaitable, errs[1]));
        held[1] = bool(g1);
        co_await g1.release();
        auto g2 = co_await lk.acquire_for(0ms, asio::redirect_error(asio::use_awaitable, errs[2]));
        held[2] = bool(g2);
        // Held by another registry (another process): a zero bound tries once, then times out.
        dlock::registry other(store, {.lease = 5s});
        auto g3 = co_await other.obtain("x").acquire_for(0ms, asio::redirect_error(asio::use_awaitable, errs[3]));
        held[3] = bool(g3);
        BOOST_TEST(other.stats().contended == 1u);
        co_await g2.release();
    });
    run(5s);
    BOOST_TEST(!errs[0]);
    BOOST_TEST(held[0]);
    BOOST_TEST(!errs[1]);
    BOOST_TEST(held[1]);
    BOOST_TEST(!errs[2]);
    BOOST_TEST(held[2]);
    BOOST_TEST(errs[3] == dlock::error::timeout);
    BOOST_TEST(!held[3]);
}

// The thread stalls past the lease: release says lock_lost, and stats and events agree.
BOOST_AUTO_TEST_CASE(a_loss_during_a_pause_is_counted_and_signalled)
{
    std::vector<dlock::lock_event_kind> events;
    dlock::registry reg(store,
                        {.lease = 500ms, .on_event = [&](const dlock::lock_event& e) { events.push_back(e.kind); }});
    error_code rel, work;
    spawn([&]() -> asio::awaitable<void> {
        auto g = co_await reg.obtain("x").acquire();
        std::this_thread::sleep_for(1200ms);  // the fault: no handler runs meanwhile
        co_await g.release(asio::redirect_error(asio::use_awaitable, rel));
    });
    run(5s);
    BOOST_TEST(rel == dlock::error::lock_lost);
    BOOST_TEST(reg.stats().lost == 1u);
    BOOST_TEST((std::find(events.begin(), events.end(), dlock::lock_event_kind::lost) != events.end()));
    BOOST_TEST((std::find(events.begin(), events.end(), dlock::lock_event_kind::released) == events.end()));
}

// A cancelled acquire whose attempt is in flight gives back what that attempt takes, at
// once: nothing is left for a caller that closes the store right after.
BOOST_AUTO_TEST_CASE(a_cancelled_acquire_leaves_no_lease)
{
    dlock::registry reg(store, {.lease = 30s});
    asio::cancellation_signal cancel;
    error_code ec;
    spawn([&]() -> asio::awaitable<void> {
        co_await reg.obtain("x").acquire(
            asio::bind_cancellation_slot(cancel.slot(), asio::redirect_error(asio::use_awaitable, ec)));
    });
    io.run_one();  // the coroutine starts: the attempt is sent, its reply queued
    cancel.emit(asio::cancellation_type::terminal);
    run(5s);
    BOOST_TEST(ec == asio::error::operation_aborted);
    BOOST_TEST(store.size() == 0u);
    BOOST_TEST(reg.size() == 0u);
}

// async_drain waits for the release a cancelled attempt leaves in flight (the CLI calls it
// before it closes the store).
BOOST_AUTO_TEST_CASE(drain_waits_for_the_background_release)
{
    dlock::registry reg(store, {.lease = 30s});
    asio::cancellation_signal cancel;
    std::size_t in_flight_after_cancel = 0, in_flight_after_drain = 1;
    error_code drained = dlock::error::timeout;
    spawn([&]() -> asio::awaitable<void> {
        co_await reg.obtain("x").acquire(
            asio::bind_cancellation_slot(cancel.slot(), asio::as_tuple(asio::use_awaitable)));
    });
    io.run_one();
    cancel.emit(asio::cancellation_type::terminal);
    in_flight_after_cancel = reg.in_flight();
    reg.async_drain([&](error_code e) {
        drained = e;
        in_flight_after_drain = reg.in_flight();
    });
    run(5s);
    BOOST_TEST(in_flight_after_cancel == 2u);  // the attempt, and the release behind it
    BOOST_TEST(!drained);
    BOOST_TEST(in_flight_after_drain == 0u);
    BOOST_TEST(store.size() == 0u);
}

BOOST_AUTO_TEST_CASE(misuse_has_its_own_codes)
{
    dlock::registry reg(store, {.lease = 5s});
    error_code empty_lock, second_wait, first_wait;
    spawn([&]() -> asio::awaitable<void> {
        dlock::lock none;
        co_await none.acquire(asio::redirect_error(asio::use_awaitable, empty_lock));
        auto g = co_await reg.obtain("x").acquire();
        g.wait_lost([&](error_code e) { first_wait = e; });
        co_await g.wait_lost(asio::redirect_error(asio::use_awaitable, second_wait));
        co_await g.release();
    });
    run(5s);
    BOOST_TEST(empty_lock == dlock::error::invalid_handle);
    BOOST_TEST(second_wait == dlock::error::operation_in_progress);
    BOOST_TEST(first_wait == asio::error::operation_aborted);
}

BOOST_AUTO_TEST_SUITE_END()
