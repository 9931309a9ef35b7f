// SPDX-License-Identifier: BSL-1.0
// lock_fsm (src/core/lock_fsm.*), sans-io: each test feeds inputs with a made-up clock and
// reads the actions the driver would perform, in the style of Boost.Redis's
// test_writer_fsm.cpp. The fixture plays the driver's part only as far as the tests need:
// it tracks the one timer from set_timer/cancel_timer, and answers every store request.
#include <dlock/error.hpp>

#include "core/lock_fsm.hpp"
#include "unit/fsm_log.hpp"

#include <boost/asio/error.hpp>
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using namespace dlock::detail;
using boost::system::error_code;
using dlock::acquire_result;
using dlock::grant_notice;
using dlock::lock_event_kind;
using dlock::renew_result;
using dlock::session_event;
using dlock::session_info;
using dlock::watch_event;
using act = fsm_action::type;
using ms = std::chrono::milliseconds;
namespace bdata = boost::unit_test::data;

namespace {

const error_code ok{};
const error_code transient = dlock::error::connection_lost;
const error_code permanent = dlock::error::permission_denied;
const error_code aborted = boost::asio::error::operation_aborted;

acquire_result won(std::uint64_t fence, std::string ref = "r", ms granted = 0ms, std::uint64_t session = 0)
{
    return {.acquired = true,
            .fencing_token = fence,
            .granted_ttl = granted,
            .lease_ref = std::move(ref),
            .session = session};
}
acquire_result busy(ms holder_ttl = -1ms)
{
    return {.acquired = false, .holder_ttl = holder_ttl};
}
grant_notice grant(std::uint64_t fence, ms ttl = 3000ms, std::string ref = "g")
{
    return {.fencing_token = fence, .ttl = ttl, .lease_ref = std::move(ref)};
}

struct fixture {
    dlock::lock_stats stats;
    std::minstd_rand rng{1};
    std::uint64_t seq = 0;
    fsm_config cfg;
    time_point t0 = time_point{} + 1000h;
    std::unique_ptr<fsm_context> ctx;  // a copy of cfg, as the registry keeps one per lease kind
    std::unique_ptr<lock_fsm> m;
    std::optional<time_point> timer;  // the driver's timer, as the actions arm it

    fixture()
    {
        cfg.lease = 3000ms;
        cfg.drift = 32ms;
        cfg.renew_every = 1000ms;
        cfg.backoff_min = 5ms;
        cfg.backoff_max = 1000ms;
        cfg.yield_pause = 0us;
        make();
    }
    // (Re)builds the machine from cfg; the token counter goes on (as the registry's does).
    lock_fsm& make(bool direct = false)
    {
        cfg.direct_handoff = direct;
        m.reset();
        ctx = std::make_unique<fsm_context>(fsm_context{cfg, stats, rng, "c:", seq});
        m = std::make_unique<lock_fsm>(*ctx);
        timer.reset();
        return *m;
    }
    lock_fsm& f() { return *m; }
    time_point at(ms d) const { return t0 + d; }

    // Takes the actions as the driver does, tracking the timer.
    std::vector<fsm_action> take()
    {
        auto v = std::move(m->actions());
        m->actions().clear();
        for (auto& a : v) {
            if (a.t == act::set_timer)
                timer = a.at;
            else if (a.t == act::cancel_timer)
                timer.reset();
        }
        return v;
    }

    boost::test_tools::predicate_result seq_is(const std::vector<fsm_action>& v, std::vector<act> want) const
    {
        bool same = v.size() == want.size();
        for (std::size_t i = 0; same && i < v.size(); ++i)
            same = v[i].t == want[i];
        if (same)
            return true;
        boost::test_tools::predicate_result r(false);
        r.message() << "got " << fsm_text(v, t0) << ", want [";
        for (std::size_t i = 0; i < want.size(); ++i)
            r.message() << (i ? " " : "") << fsm_text(want[i]);
        r.message() << "]";
        return r;
    }

    // ---- field checks (return a predicate_result so failures point at the caller) ----
    boost::test_tools::predicate_result fail(const fsm_action& a, const char* what) const
    {
        boost::test_tools::predicate_result r(false);
        r.message() << what << ": got " << fsm_text(a, t0);
        return r;
    }
    boost::test_tools::predicate_result is_attempt(const fsm_action& a, std::string token, bool queue) const
    {
        if (a.t != act::attempt || a.token != token || a.queue != queue)
            return fail(a, ("attempt(" + token + (queue ? ",queue)" : ")")).c_str());
        return true;
    }
    boost::test_tools::predicate_result is_watch(const fsm_action& a, std::string token) const
    {
        if (a.t != act::watch || a.token != token)
            return fail(a, ("watch(" + token + ")").c_str());
        return true;
    }
    boost::test_tools::predicate_result is_timer(const fsm_action& a, time_point when) const
    {
        if (a.t != act::set_timer || a.at != when)
            return fail(a, "set_timer at the given time");
        return true;
    }
    boost::test_tools::predicate_result is_timer_within(const fsm_action& a, time_point lo, time_point hi) const
    {
        if (a.t != act::set_timer || a.at < lo || a.at > hi)
            return fail(a, "set_timer within the range");
        return true;
    }
    boost::test_tools::predicate_result is_renew(const fsm_action& a, std::string token, std::string ref) const
    {
        if (a.t != act::renew || a.token != token || a.ref != ref)
            return fail(a, ("renew(" + token + "," + ref + ")").c_str());
        return true;
    }
    boost::test_tools::predicate_result is_release(const fsm_action& a, std::string token, std::string ref,
                                                   std::uint64_t id) const
    {
        if (a.t != act::release || a.token != token || a.ref != ref || a.id != id || a.at != time_point{})
            return fail(a, ("release(" + token + "," + ref + ",id=" + std::to_string(id) + ")").c_str());
        return true;
    }
    boost::test_tools::predicate_result is_granted(const fsm_action& a, std::uint64_t id, std::uint64_t hold,
                                                   std::uint64_t fence) const
    {
        if (a.t != act::complete_waiter || a.id != id || a.hold != hold || a.fence != fence || a.ec)
            return fail(a, "complete_waiter with a hold");
        return true;
    }
    boost::test_tools::predicate_result is_completed(const fsm_action& a, std::uint64_t id, error_code ec) const
    {
        if (a.t != act::complete_waiter || a.id != id || a.hold != 0 || a.ec != ec)
            return fail(a, ("complete_waiter(id=" + std::to_string(id) + ",ec=" + ec.message() + ")").c_str());
        return true;
    }
    boost::test_tools::predicate_result is_released(const fsm_action& a, std::uint64_t id, error_code ec) const
    {
        if (a.t != act::complete_release || a.id != id || a.ec != ec)
            return fail(a, ("complete_release(id=" + std::to_string(id) + ",ec=" + ec.message() + ")").c_str());
        return true;
    }
    boost::test_tools::predicate_result is_event(const fsm_action& a, lock_event_kind k, std::uint64_t fence) const
    {
        if (a.t != act::event || a.kind != k || a.fence != fence)
            return fail(a, (std::string("event(") + dlock::fsm_text(k) + ")").c_str());
        return true;
    }

    // Fires the driver's timer at its time (it must be armed).
    void fire()
    {
        BOOST_REQUIRE(timer.has_value());
        auto when = *timer;
        timer.reset();
        m->on_timer(when);
    }

    // free → held: waiter 1 of owner 10 at t0, attempt answered at t0+10ms with fence 7 and
    // lease ref "r". The lease runs to t0+2968ms, its renewal timer at t0+1010ms.
    std::uint64_t hold_lease(std::uint64_t waiter = 1, std::uint64_t owner = 10)
    {
        auto token = "c:" + std::to_string(seq + 1);
        f().on_acquire(waiter, owner, false, t0);
        auto v = take();
        BOOST_TEST(seq_is(v, {act::attempt}));
        BOOST_TEST(is_attempt(v.at(0), token, false));
        f().on_attempt_done(ok, won(7), at(10ms));
        v = take();
        BOOST_TEST(seq_is(v, {act::set_timer, act::event, act::complete_waiter}));
        BOOST_TEST(is_timer(v.at(0), at(1010ms)));
        BOOST_TEST(is_event(v.at(1), lock_event_kind::acquired, 7));
        BOOST_TEST(v.at(2).t == act::complete_waiter);
        BOOST_TEST(v.at(2).id == waiter);
        BOOST_TEST(v.at(2).fence == 7u);
        BOOST_TEST(f().state() == fsm_state::held);
        BOOST_TEST(f().valid_until() == at(2968ms));
        return v.at(2).hold;
    }

    // free → waiting (not direct) or queued (direct): waiter 1 of owner 10 at t0, contended
    // (holder 500 ms), watch up and ready, the second (queued) attempt contended again at
    // t0+8ms with the holder's 400 ms left: asleep until t0+409ms.
    void wait_for_lease(bool direct)
    {
        if (cfg.direct_handoff != direct)
            make(direct);
        f().on_acquire(1, 10, false, t0);
        auto v = take();
        BOOST_TEST(is_attempt(v.at(0), "c:1", false));
        f().on_attempt_done(ok, busy(500ms), at(5ms));
        v = take();
        BOOST_TEST(seq_is(v, {act::watch, act::set_timer}));
        BOOST_TEST(is_watch(v.at(0), direct ? "c:2" : ""));
        BOOST_TEST(is_timer(v.at(1), at(506ms)));  // holder_ttl + 1 ms
        BOOST_TEST(f().state() == fsm_state::waiting);
        f().on_watch(watch_event::ready, {}, at(6ms));
        v = take();
        BOOST_TEST(seq_is(v, {act::cancel_timer, act::attempt}));
        BOOST_TEST(is_attempt(v.at(1), direct ? "c:2" : "c:2", direct));
        BOOST_TEST(f().state() == fsm_state::attempting);
        f().on_attempt_done(ok, busy(400ms), at(8ms));
        v = take();
        BOOST_TEST(seq_is(v, {act::set_timer}));
        BOOST_TEST(is_timer(v.at(0), at(409ms)));
        BOOST_TEST(f().state() == (direct ? fsm_state::queued : fsm_state::waiting));
        BOOST_TEST(f().in_flight() == 0u);
        BOOST_TEST(!f().idle());
    }

    // A waiter queued at a per-session store with its own queue (etcd, ZooKeeper): refused,
    // watching its predecessor, refused again; next comes the grant.
    void queue_on_a_session_store()
    {
        cfg.per_session = true;
        cfg.confirms = true;
        cfg.inherent_queue = true;
        make(true);
        f().on_acquire(1, 10, false, t0);
        take();
        f().on_attempt_done(ok, busy(), at(5ms));
        take();
        f().on_watch(watch_event::ready, {}, at(6ms));
        take();
        f().on_attempt_done(ok, busy(), at(8ms));
        take();
    }

    // Ends a scenario: nothing may be in flight or waiting any more.
    void check_idle()
    {
        BOOST_TEST(f().in_flight() == 0u);
        BOOST_TEST(f().waiters() == 0u);
        BOOST_TEST(f().holds() == 0u);
        BOOST_TEST(f().idle());
        BOOST_TEST(f().state() == fsm_state::free);
        BOOST_TEST(f().actions().empty());
    }
};

// Both modes of the store (direct hand-off or not).
const auto modes = bdata::make({false, true});

}  // namespace

BOOST_FIXTURE_TEST_SUITE(lock_fsm_suite, fixture)

// ======================================================================================
// free / attempting / held / renewing: the ordinary life of a lease
// ======================================================================================

BOOST_DATA_TEST_CASE_F(fixture, acquire_renew_release, modes, direct)
{
    make(direct);
    BOOST_TEST(f().state() == fsm_state::free);
    BOOST_TEST(f().idle());
    f().on_acquire(1, 10, false, t0);
    auto v = take();
    BOOST_TEST(seq_is(v, {act::attempt}));
    BOOST_TEST(is_attempt(v.at(0), "c:1", false));  // the first attempt is never queued
    BOOST_TEST(f().state() == fsm_state::attempting);
    BOOST_TEST(f().in_flight() == 1u);
    BOOST_TEST(f().waiters() == 1u);

    f().on_attempt_done(ok, won(7), at(10ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::set_timer, act::event, act::complete_waiter}));
    BOOST_TEST(is_timer(v.at(0), at(1010ms)));  // reply time + renew_every
    BOOST_TEST(is_event(v.at(1), lock_event_kind::acquired, 7));
    BOOST_TEST(is_granted(v.at(2), 1, 1, 7));
    BOOST_TEST(f().state() == fsm_state::held);
    BOOST_TEST(f().valid_until() == at(2968ms));  // send time + lease - drift
    BOOST_TEST(f().fence() == 7u);
    BOOST_TEST(f().in_flight() == 0u);
    BOOST_TEST(stats.acquired == 1u);

    fire();  // renewal due
    v = take();
    BOOST_TEST(seq_is(v, {act::renew, act::set_timer}));
    BOOST_TEST(is_renew(v.at(0), "c:1", "r"));
    BOOST_TEST(is_timer(v.at(1), at(2968ms)));  // the lease's end while the renewal runs
    BOOST_TEST(f().state() == fsm_state::renewing);
    BOOST_TEST(f().in_flight() == 1u);

    f().on_renew_done(ok, {.owned = true}, at(1020ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::event, act::set_timer}));
    BOOST_TEST(is_event(v.at(0), lock_event_kind::renewed, 7));
    BOOST_TEST(is_timer(v.at(1), at(2010ms)));    // renewal send time + renew_every
    BOOST_TEST(f().valid_until() == at(3978ms));  // renewal send time + lease - drift
    BOOST_TEST(f().state() == fsm_state::held);
    BOOST_TEST(stats.renewals == 1u);

    f().on_release(1, 100, at(1500ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::event, act::release, act::cancel_timer}));
    BOOST_TEST(is_event(v.at(0), lock_event_kind::released, 7));
    BOOST_TEST(is_release(v.at(1), "c:1", "r", 100));
    BOOST_TEST(f().state() == fsm_state::free);
    BOOST_TEST(f().in_flight() == 1u);
    BOOST_TEST(!f().idle());

    f().on_release_done(100, ok, true, at(1510ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::complete_release}));
    BOOST_TEST(is_released(v.at(0), 100, ok));
    BOOST_TEST(stats.released == 1u);
    check_idle();
}

// A store that batches renewals gets them on a grid: many leases then renew in one turn.
// Late by less than a grid step; the lease itself still counts from each renewal's send.
BOOST_AUTO_TEST_CASE(renewals_fall_on_the_grid)
{
    cfg.renew_grid = 64ms;  // t0 (1000 h) is on the grid
    make();
    f().on_acquire(1, 10, false, t0);
    take();
    f().on_attempt_done(ok, won(7), at(10ms));
    auto v = take();
    BOOST_TEST(is_timer(v.at(0), at(1024ms)));  // 1010 ms, moved up to the next grid line
    fire();
    v = take();
    BOOST_TEST(seq_is(v, {act::renew, act::set_timer}));
    f().on_renew_done(ok, {.owned = true}, at(1030ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::event, act::set_timer}));
    BOOST_TEST(is_timer(v.at(1), at(2048ms)));             // sent at 1024 ms + 1000 ms, on the grid
    BOOST_TEST(f().valid_until() == at(1024ms + 2968ms));  // send time + lease - drift
}

BOOST_DATA_TEST_CASE_F(fixture, reentry_and_inner_release, modes, direct)
{
    make(direct);
    auto h1 = hold_lease(1, 10);
    f().on_acquire(2, 10, false, at(20ms));  // the same owner
    auto v = take();
    BOOST_TEST(seq_is(v, {act::complete_waiter}));
    BOOST_TEST(is_granted(v.at(0), 2, h1 + 1, 7));
    BOOST_TEST(stats.reentered == 1u);
    BOOST_TEST(stats.acquired == 2u);
    BOOST_TEST(f().holds() == 2u);

    // re-entry with try_once is granted as well
    f().on_acquire(3, 10, true, at(21ms));
    v = take();
    BOOST_TEST(is_granted(v.at(0), 3, h1 + 2, 7));

    f().on_release(h1 + 2, 101, at(25ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::complete_release}));
    BOOST_TEST(is_released(v.at(0), 101, ok));
    f().on_release(h1, 102, at(30ms));  // the outer one first: the inner still holds
    v = take();
    BOOST_TEST(seq_is(v, {act::complete_release}));
    BOOST_TEST(is_released(v.at(0), 102, ok));
    BOOST_TEST(f().state() == fsm_state::held);

    f().on_release(h1 + 1, 103, at(40ms));  // the last hold: back to the store
    v = take();
    BOOST_TEST(seq_is(v, {act::event, act::release, act::cancel_timer}));
    BOOST_TEST(is_release(v.at(1), "c:1", "r", 103));
    f().on_release_done(103, ok, true, at(50ms));
    BOOST_TEST(is_released(take().at(0), 103, ok));
    check_idle();
}

BOOST_DATA_TEST_CASE_F(fixture, try_once, modes, direct)
{
    make(direct);
    // contended: answered after its one attempt, no hold and no error, no watch
    f().on_acquire(1, 10, true, t0);
    BOOST_TEST(is_attempt(take().at(0), "c:1", false));
    f().on_attempt_done(ok, busy(500ms), at(5ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::complete_waiter}));
    BOOST_TEST(is_completed(v.at(0), 1, ok));
    BOOST_TEST(stats.contended == 1u);
    check_idle();

    // a transient error: the attempt's token is released behind it, the caller gets the error
    f().on_acquire(2, 10, true, at(10ms));
    BOOST_TEST(is_attempt(take().at(0), "c:2", false));
    f().on_attempt_done(transient, {}, at(15ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::release, act::complete_waiter}));
    BOOST_TEST(is_release(v.at(0), "c:2", "", 0));
    BOOST_TEST(is_completed(v.at(1), 2, transient));
    BOOST_TEST(f().in_flight() == 1u);
    f().on_release_done(0, ok, false, at(16ms));
    check_idle();

    // acquired
    f().on_acquire(3, 10, true, at(20ms));
    BOOST_TEST(is_attempt(take().at(0), "c:3", false));
    f().on_attempt_done(ok, won(9), at(25ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::set_timer, act::event, act::complete_waiter}));
    auto h = v.at(2).hold;
    BOOST_TEST(is_granted(v.at(2), 3, h, 9));

    // held here by another owner: answered at once, no store request
    f().on_acquire(4, 20, true, at(30ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::complete_waiter}));
    BOOST_TEST(is_completed(v.at(0), 4, ok));
    // a local waiter queued ahead: also at once
    f().on_acquire(5, 20, false, at(31ms));
    BOOST_TEST(take().empty());
    f().on_acquire(6, 30, true, at(32ms));
    BOOST_TEST(is_completed(take().at(0), 6, ok));
    BOOST_TEST(f().waiters() == 1u);
    f().on_cancel(5, aborted, at(33ms));
    BOOST_TEST(is_completed(take().at(0), 5, aborted));
    f().on_release(h, 7, at(40ms));
    take();
    f().on_release_done(7, ok, true, at(41ms));
    BOOST_TEST(seq_is(take(), {act::complete_release}));
    check_idle();
}

BOOST_AUTO_TEST_CASE(try_once_while_attempting_for_another_waiter)
{
    f().on_acquire(1, 10, false, t0);
    take();
    f().on_acquire(2, 20, true, at(1ms));  // a waiter is ahead: no waiting for it
    auto v = take();
    BOOST_TEST(seq_is(v, {act::complete_waiter}));
    BOOST_TEST(is_completed(v.at(0), 2, ok));
    BOOST_TEST(f().waiters() == 1u);
    f().on_attempt_done(ok, won(3), at(5ms));
    auto h = take().at(2).hold;
    f().on_release(h, 0, at(6ms));
    take();
    f().on_release_done(0, ok, true, at(7ms));
    take();
    check_idle();
}

// ======================================================================================
// waiting (not direct): watch ready / released / resync, timers, holder_ttl, backoff
// ======================================================================================

BOOST_AUTO_TEST_CASE(waiting_woken_by_release_notification)
{
    wait_for_lease(false);
    // a `released` notification while asleep: attempt at once, fresh token (not direct)
    f().on_watch(watch_event::released, {}, at(100ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::cancel_timer, act::attempt}));
    BOOST_TEST(is_attempt(v.at(1), "c:3", false));
    BOOST_TEST(stats.woken_by_notification == 1u);
    f().on_attempt_done(ok, won(8), at(110ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::unwatch, act::set_timer, act::event, act::complete_waiter}));
    BOOST_TEST(is_timer(v.at(1), at(1110ms)));
    BOOST_TEST(is_event(v.at(2), lock_event_kind::acquired, 8));
    BOOST_TEST(is_granted(v.at(3), 1, 1, 8));
    BOOST_TEST(f().valid_until() == at(100ms + 2968ms));
    // watch events after unwatch are ignored
    f().on_watch(watch_event::released, {}, at(120ms));
    f().on_watch(watch_event::granted, grant(99), at(120ms));
    BOOST_TEST(take().empty());
    BOOST_TEST(f().fence() == 8u);
    f().on_release(1, 0, at(200ms));
    take();
    f().on_release_done(0, ok, true, at(201ms));
    take();
    check_idle();
}

BOOST_AUTO_TEST_CASE(waiting_woken_by_timer_and_resync)
{
    wait_for_lease(false);
    fire();  // the holder's lease should have ended
    auto v = take();
    BOOST_TEST(seq_is(v, {act::attempt}));
    BOOST_TEST(is_attempt(v.at(0), "c:3", false));
    BOOST_TEST(stats.woken_by_timer == 1u);
    // unknown holder ttl: sleep by the backoff, in [min/2, min]
    f().on_attempt_done(ok, busy(), at(410ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::set_timer}));
    BOOST_TEST(is_timer_within(v.at(0), at(412ms), at(415ms)));
    BOOST_TEST(f().state() == fsm_state::waiting);
    // resync while asleep: re-check at once
    f().on_watch(watch_event::resync, {}, at(411ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::cancel_timer, act::attempt}));
    BOOST_TEST(stats.woken_by_notification == 1u);
    // resync or released while the attempt runs: noted, retried as soon as it answers
    f().on_watch(watch_event::resync, {}, at(412ms));
    BOOST_TEST(take().empty());
    f().on_attempt_done(ok, busy(300ms), at(413ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::attempt}));
    BOOST_TEST(is_attempt(v.at(0), "c:5", false));
    f().on_watch(watch_event::released, {}, at(414ms));
    BOOST_TEST(take().empty());
    f().on_attempt_done(ok, busy(300ms), at(415ms));
    BOOST_TEST(seq_is(take(), {act::attempt}));
    // not notified this time: sleep for the holder's ttl + 1 ms
    f().on_attempt_done(ok, busy(300ms), at(416ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::set_timer}));
    BOOST_TEST(is_timer(v.at(0), at(717ms)));
    // cancel while waiting: unwatch, timer off, then the caller
    f().on_cancel(1, aborted, at(500ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::unwatch, act::cancel_timer, act::complete_waiter}));
    BOOST_TEST(is_completed(v.at(2), 1, aborted));
    BOOST_TEST(stats.cancelled == 1u);
    check_idle();
}

BOOST_AUTO_TEST_CASE(holder_ttl_capped_by_backoff_max_on_first_contention)
{
    f().on_acquire(1, 10, false, t0);
    take();
    f().on_attempt_done(ok, busy(20'000ms), at(5ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::watch, act::set_timer}));
    BOOST_TEST(is_timer(v.at(1), at(1005ms)));  // min(holder + 1, backoff_max)
    // unknown ttl at first: jitter of the un-advanced step
    f().on_cancel(1, aborted, at(6ms));
    take();
    check_idle();
    f().on_acquire(2, 10, false, at(10ms));
    take();
    f().on_attempt_done(ok, busy(), at(15ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::watch, act::set_timer}));
    BOOST_TEST(is_timer_within(v.at(1), at(17ms), at(20ms)));
    f().on_cancel(2, aborted, at(16ms));
    take();
    check_idle();
}

BOOST_AUTO_TEST_CASE(two_waiters_cancel_one_while_waiting)
{
    wait_for_lease(false);
    f().on_acquire(2, 20, false, at(100ms));
    BOOST_TEST(take().empty());  // asleep: the next attempt serves it too
    f().on_cancel(1, aborted, at(101ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::complete_waiter}));  // the wait goes on for waiter 2
    BOOST_TEST(f().state() == fsm_state::waiting);
    f().on_cancel(77, aborted, at(102ms));  // unknown: nothing
    BOOST_TEST(take().empty());
    fire();
    BOOST_TEST(seq_is(take(), {act::attempt}));
    f().on_attempt_done(ok, won(5), at(420ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::unwatch, act::set_timer, act::event, act::complete_waiter}));
    BOOST_TEST(is_granted(v.at(3), 2, 1, 5));
    f().on_release(1, 0, at(430ms));
    take();
    f().on_release_done(0, ok, true, at(431ms));
    take();
    check_idle();
}

// ======================================================================================
// queued (direct hand-off): grants
// ======================================================================================

BOOST_AUTO_TEST_CASE(queued_granted_while_asleep)
{
    wait_for_lease(true);
    // queued since t0+6ms (the first queued attempt's send time): lease to t0+6+3000-32
    f().on_watch(watch_event::granted, grant(9, 3000ms, "g"), at(300ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::unwatch, act::cancel_timer, act::set_timer, act::event, act::complete_waiter}));
    BOOST_TEST(is_timer(v.at(2), at(1300ms)));
    BOOST_TEST(is_event(v.at(3), lock_event_kind::acquired, 9));
    BOOST_TEST(is_granted(v.at(4), 1, 1, 9));
    BOOST_TEST(f().valid_until() == at(2974ms));
    BOOST_TEST(stats.store_handoffs == 1u);
    BOOST_TEST(f().in_flight() == 0u);
    // the lease is the wait token's, with the grant's ref
    fire();
    v = take();
    BOOST_TEST(is_renew(v.at(0), "c:2", "g"));
    f().on_renew_done(ok, {.owned = true}, at(1310ms));
    take();
    f().on_release(1, 0, at(1400ms));
    v = take();
    BOOST_TEST(is_release(v.at(1), "c:2", "g", 0));
    f().on_release_done(0, ok, true, at(1401ms));
    take();
    check_idle();
}

// A store with its own queue (etcd): queued with the holder's lease unknown, the waiter
// sleeps a lease (a safety net) instead of retrying on the backoff; the store's grant wakes it.
BOOST_AUTO_TEST_CASE(queued_in_a_store_queue_is_not_a_poll)
{
    cfg.inherent_queue = true;
    make(true);
    f().on_acquire(1, 10, false, t0);
    take();
    f().on_attempt_done(ok, busy(), at(5ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::watch, act::set_timer}));
    f().on_watch(watch_event::ready, {}, at(6ms));
    v = take();
    BOOST_TEST(is_attempt(v.at(1), "c:2", true));
    f().on_attempt_done(ok, busy(), at(8ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::set_timer}));
    BOOST_TEST(is_timer(v.at(0), at(3008ms)));  // a lease away, not backoff_min
    BOOST_TEST(f().state() == fsm_state::queued);
    f().on_watch(watch_event::granted, grant(9, 3000ms, "g"), at(300ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::unwatch, act::cancel_timer, act::set_timer, act::event, act::complete_waiter}));
    BOOST_TEST(is_granted(v.at(4), 1, 1, 9));
    f().on_release(1, 0, at(400ms));
    take();
    f().on_release_done(0, ok, true, at(401ms));
    take();
    check_idle();
}

BOOST_AUTO_TEST_CASE(queued_grant_with_too_little_left_is_confirmed_by_an_attempt)
{
    wait_for_lease(true);
    fire();  // t0+409: queued attempt again (same token, still queued)
    auto v = take();
    BOOST_TEST(is_attempt(v.at(0), "c:2", true));
    f().on_attempt_done(ok, busy(2000ms), at(420ms));
    v = take();
    BOOST_TEST(is_timer(v.at(0), at(2421ms)));
    // a grant at t0+2000ms: t0+2974 leaves less than ttl/2: confirm it
    f().on_watch(watch_event::granted, grant(9), at(2000ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::cancel_timer, act::attempt}));
    BOOST_TEST(is_attempt(v.at(1), "c:2", true));
    BOOST_TEST(stats.store_handoffs == 0u);
    BOOST_TEST(stats.woken_by_notification == 1u);
    f().on_attempt_done(ok, won(9, "g"), at(2005ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::unwatch, act::set_timer, act::event, act::complete_waiter}));
    BOOST_TEST(is_granted(v.at(3), 1, 1, 9));
    BOOST_TEST(f().valid_until() == at(2000ms + 2968ms));
    f().on_release(1, 0, at(2100ms));
    take();
    f().on_release_done(0, ok, true, at(2101ms));
    take();
    check_idle();
}

// Grant while attempting: the attempt (same token) is spent, the lease is granted once,
// and its late reply neither grants again nor releases the lease.
BOOST_DATA_TEST_CASE_F(fixture, granted_while_attempting_then_reply, bdata::make({0, 1, 2}), reply)
{
    make(true);
    wait_for_lease(true);
    fire();  // t0+409: the queued attempt again
    auto v = take();
    BOOST_TEST(seq_is(v, {act::attempt}));
    BOOST_TEST(is_attempt(v.at(0), "c:2", true));
    BOOST_TEST(stats.woken_by_timer == 1u);
    f().on_watch(watch_event::granted, grant(9, 3000ms, "g"), at(420ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::unwatch, act::set_timer, act::event, act::complete_waiter}));
    BOOST_TEST(is_granted(v.at(3), 1, 1, 9));
    BOOST_TEST(f().state() == fsm_state::held);
    BOOST_TEST(f().in_flight() == 1u);  // the spent attempt
    BOOST_TEST(stats.store_handoffs == 1u);

    auto answer = [&](time_point now) {
        if (reply == 0)
            f().on_attempt_done(ok, won(9, "g"), now);
        else if (reply == 1)
            f().on_attempt_done(ok, busy(100ms), now);
        else
            f().on_attempt_done(transient, {}, now);
    };
    answer(at(430ms));
    BOOST_TEST(take().empty());  // no second grant, no release of our lease
    BOOST_TEST(f().state() == fsm_state::held);
    BOOST_TEST(f().holds() == 1u);
    BOOST_TEST(f().fence() == 9u);
    BOOST_TEST(stats.acquired == 1u);
    BOOST_TEST(f().in_flight() == 0u);
    f().on_release(1, 100, at(500ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::event, act::release, act::cancel_timer}));
    BOOST_TEST(is_release(v.at(1), "c:2", "g", 100));
    f().on_release_done(100, ok, true, at(501ms));
    BOOST_TEST(is_released(take().at(0), 100, ok));
    check_idle();
}

BOOST_DATA_TEST_CASE_F(fixture, granted_while_attempting_released_before_the_reply, bdata::make({0, 1, 2}), reply)
{
    make(true);
    wait_for_lease(true);
    fire();
    take();
    f().on_watch(watch_event::granted, grant(9, 3000ms, "g"), at(420ms));
    take();
    f().on_release(1, 100, at(425ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::event, act::release, act::cancel_timer}));
    BOOST_TEST(is_release(v.at(1), "c:2", "g", 100));
    BOOST_TEST(f().in_flight() == 2u);
    BOOST_TEST(f().state() == fsm_state::free);
    // the spent reply must not create a lease
    if (reply == 0)
        f().on_attempt_done(ok, won(9, "g"), at(430ms));
    else if (reply == 1)
        f().on_attempt_done(ok, busy(), at(430ms));
    else
        f().on_attempt_done(transient, {}, at(430ms));
    BOOST_TEST(take().empty());
    BOOST_TEST(f().fence() == 0u);
    BOOST_TEST(f().state() == fsm_state::free);
    f().on_release_done(100, ok, true, at(431ms));
    BOOST_TEST(is_released(take().at(0), 100, ok));
    check_idle();
}

BOOST_AUTO_TEST_CASE(granted_while_attempting_with_a_newcomer_before_the_spent_reply)
{
    make(true);
    wait_for_lease(true);
    fire();
    take();
    f().on_watch(watch_event::granted, grant(9), at(420ms));
    take();
    f().on_release(1, 0, at(425ms));
    take();
    f().on_acquire(2, 20, false, at(426ms));
    BOOST_TEST(take().empty());  // one attempt in flight at most: wait for the spent one
    BOOST_TEST(f().in_flight() == 2u);
    f().on_attempt_done(ok, won(9, "g"), at(430ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::attempt}));
    BOOST_TEST(is_attempt(v.at(0), "c:3", false));
    f().on_attempt_done(ok, won(10), at(440ms));
    v = take();
    BOOST_TEST(is_granted(v.at(2), 2, 2, 10));
    f().on_release(2, 0, at(450ms));
    take();
    f().on_release_done(0, ok, true, at(451ms));
    f().on_release_done(0, ok, true, at(452ms));
    take();
    check_idle();
}

// A grant while the attempt runs that leaves too little: decided when the attempt answers.
BOOST_AUTO_TEST_CASE(granted_while_attempting_with_too_little_left)
{
    make(true);
    wait_for_lease(true);
    f().on_watch(watch_event::released, {}, at(2000ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::cancel_timer, act::attempt}));
    BOOST_TEST(is_attempt(v.at(1), "c:2", true));
    f().on_watch(watch_event::granted, grant(9), at(2001ms));
    BOOST_TEST(take().empty());
    BOOST_TEST(f().state() == fsm_state::attempting);
    // contended (it ran before the hand-off): the grant still leaves too little: confirm now
    f().on_attempt_done(ok, busy(100ms), at(2002ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::attempt}));
    BOOST_TEST(is_attempt(v.at(0), "c:2", true));
    f().on_attempt_done(ok, won(9, "g"), at(2003ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::unwatch, act::set_timer, act::event, act::complete_waiter}));
    BOOST_TEST(is_granted(v.at(3), 1, 1, 9));
    f().on_release(1, 0, at(2100ms));
    take();
    f().on_release_done(0, ok, true, at(2101ms));
    check_idle();
}

// A grant while the attempt runs, taken when a contended reply comes with enough time left.
BOOST_AUTO_TEST_CASE(granted_stored_then_taken_on_contended_reply)
{
    make(true);
    wait_for_lease(true);
    fire();  // attempt at t0+409
    take();
    // an event at the same time as a grant the machine cannot use yet is simulated by a
    // grant before any queued attempt: not possible; instead check the `ready`-before-send
    // path: a `ready` while attempting only marks it notified
    f().on_watch(watch_event::ready, {}, at(410ms));
    BOOST_TEST(take().empty());
    f().on_attempt_done(ok, busy(100ms), at(411ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::attempt}));  // notified: again at once
    BOOST_TEST(is_attempt(v.at(0), "c:2", true));
    f().on_cancel(1, aborted, at(412ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::release, act::unwatch, act::complete_waiter}));
    f().on_attempt_done(ok, busy(), at(413ms));
    f().on_release_done(0, ok, false, at(414ms));
    BOOST_TEST(take().empty());
    check_idle();
}

// ======================================================================================
// cancel
// ======================================================================================

BOOST_AUTO_TEST_CASE(cancel_while_queued_withdraws_before_completing)
{
    make(true);
    wait_for_lease(true);
    f().on_cancel(1, aborted, at(100ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::unwatch, act::release, act::cancel_timer, act::complete_waiter}));
    BOOST_TEST(is_release(v.at(1), "c:2", "", 0));  // the withdraw of the wait token
    BOOST_TEST(is_completed(v.at(3), 1, aborted));
    BOOST_TEST(f().in_flight() == 1u);
    BOOST_TEST(!f().idle());
    BOOST_TEST(stats.cancelled == 1u);
    // a grant that was on its way is dropped
    f().on_watch(watch_event::granted, grant(9), at(101ms));
    BOOST_TEST(take().empty());
    f().on_release_done(0, ok, true, at(102ms));
    check_idle();
}

BOOST_DATA_TEST_CASE_F(fixture, cancel_while_attempting_releases_at_once, modes, direct)
{
    make(direct);
    f().on_acquire(1, 10, false, t0);
    take();
    f().on_cancel(1, aborted, at(1ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::release, act::complete_waiter}));
    BOOST_TEST(is_release(v.at(0), "c:1", "", 0));
    BOOST_TEST(is_completed(v.at(1), 1, aborted));
    BOOST_TEST(f().in_flight() == 2u);  // the attempt and its release
    BOOST_TEST(f().state() == fsm_state::free);
    f().on_attempt_done(ok, won(7), at(5ms));  // it did take the name: already released behind it
    BOOST_TEST(take().empty());
    BOOST_TEST(f().fence() == 0u);
    BOOST_TEST(f().in_flight() == 1u);
    f().on_release_done(0, ok, true, at(6ms));
    BOOST_TEST(take().empty());
    check_idle();
}

BOOST_AUTO_TEST_CASE(cancel_while_attempting_queued_releases_once)
{
    make(true);
    wait_for_lease(true);
    fire();
    BOOST_TEST(is_attempt(take().at(0), "c:2", true));
    f().on_cancel(1, aborted, at(410ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::release, act::unwatch, act::complete_waiter}));
    BOOST_TEST(is_release(v.at(0), "c:2", "", 0));
    f().on_attempt_done(ok, busy(), at(411ms));
    BOOST_TEST(take().empty());
    f().on_release_done(0, ok, false, at(412ms));
    check_idle();
}

BOOST_DATA_TEST_CASE_F(fixture, cancel_a_local_waiter_while_held, modes, direct)
{
    make(direct);
    auto h = hold_lease();
    f().on_acquire(2, 20, false, at(20ms));
    BOOST_TEST(take().empty());
    BOOST_TEST(f().waiters() == 1u);
    f().on_cancel(2, aborted, at(30ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::complete_waiter}));
    BOOST_TEST(is_completed(v.at(0), 2, aborted));
    f().on_cancel(2, aborted, at(31ms));  // twice: nothing
    BOOST_TEST(take().empty());
    f().on_release(h, 0, at(40ms));
    BOOST_TEST(seq_is(take(), {act::event, act::release, act::cancel_timer}));
    f().on_release_done(0, ok, true, at(41ms));
    check_idle();
}

// ======================================================================================
// deadline (acquire_for)
// ======================================================================================

BOOST_DATA_TEST_CASE_F(fixture, deadline_before_any_answer_gets_one_attempt, modes, direct)
{
    make(direct);
    f().on_acquire(1, 10, false, t0);
    take();
    f().on_deadline(1, at(1ms));
    BOOST_TEST(take().empty());  // it gets this attempt first
    BOOST_TEST(f().waiters() == 1u);
    f().on_attempt_done(ok, busy(500ms), at(5ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::complete_waiter}));
    BOOST_TEST(is_completed(v.at(0), 1, dlock::error::timeout));
    BOOST_TEST(stats.cancelled == 1u);
    check_idle();

    // the same bound, but the attempt wins: the lease is granted after all
    f().on_acquire(2, 10, false, at(10ms));
    take();
    f().on_deadline(2, at(10ms));
    f().on_attempt_done(ok, won(8), at(12ms));
    v = take();
    BOOST_TEST(is_granted(v.at(2), 2, 1, 8));
    f().on_release(1, 0, at(20ms));
    take();
    f().on_release_done(0, ok, true, at(21ms));
    take();
    check_idle();

    // a transient error after the bound: timeout, not the store's error
    f().on_acquire(3, 10, false, at(30ms));
    take();
    f().on_deadline(3, at(30ms));
    f().on_attempt_done(transient, {}, at(32ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::release, act::complete_waiter}));
    BOOST_TEST(is_completed(v.at(1), 3, dlock::error::timeout));
    f().on_release_done(0, ok, false, at(33ms));
    check_idle();
}

BOOST_DATA_TEST_CASE_F(fixture, deadline_while_waiting, modes, direct)
{
    make(direct);
    wait_for_lease(direct);
    // waiter 1 has seen a failed attempt: the bound is final
    f().on_deadline(1, at(100ms));
    auto v = take();
    if (direct) {
        BOOST_TEST(seq_is(v, {act::unwatch, act::release, act::cancel_timer, act::complete_waiter}));
        BOOST_TEST(is_release(v.at(1), "c:2", "", 0));
        f().on_release_done(0, ok, false, at(101ms));
    } else {
        BOOST_TEST(seq_is(v, {act::unwatch, act::cancel_timer, act::complete_waiter}));
    }
    BOOST_TEST(is_completed(v.back(), 1, dlock::error::timeout));
    check_idle();
}

BOOST_AUTO_TEST_CASE(deadline_of_a_waiter_that_came_during_the_sleep_attempts_at_once)
{
    wait_for_lease(false);
    f().on_acquire(2, 20, false, at(100ms));
    BOOST_TEST(take().empty());
    f().on_deadline(2, at(101ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::cancel_timer, act::attempt}));
    BOOST_TEST(f().waiters() == 2u);
    // contended: waiter 2 has had its attempt now (timeout); waiter 1 waits on
    f().on_attempt_done(ok, busy(200ms), at(102ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::complete_waiter, act::set_timer}));
    BOOST_TEST(is_completed(v.at(0), 2, dlock::error::timeout));
    BOOST_TEST(is_timer(v.at(1), at(303ms)));
    BOOST_TEST(f().waiters() == 1u);
    f().on_cancel(1, aborted, at(110ms));
    take();
    check_idle();
}

BOOST_AUTO_TEST_CASE(deadline_of_a_waiter_that_came_during_an_attempt)
{
    f().on_acquire(1, 10, false, t0);
    take();
    f().on_acquire(2, 20, false, at(1ms));  // after the attempt was sent
    f().on_deadline(2, at(2ms));
    BOOST_TEST(take().empty());
    f().on_attempt_done(ok, busy(500ms), at(5ms));
    auto v = take();
    // waiter 2 has not had an attempt of its own yet: it stays for the next one
    BOOST_TEST(seq_is(v, {act::watch, act::set_timer}));
    BOOST_TEST(f().waiters() == 2u);
    f().on_watch(watch_event::ready, {}, at(6ms));
    BOOST_TEST(seq_is(take(), {act::cancel_timer, act::attempt}));
    f().on_attempt_done(ok, busy(500ms), at(7ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::complete_waiter, act::set_timer}));
    BOOST_TEST(is_completed(v.at(0), 2, dlock::error::timeout));
    f().on_cancel(1, aborted, at(8ms));
    take();
    check_idle();
}

BOOST_DATA_TEST_CASE_F(fixture, deadline_with_a_local_holder_is_final_at_once, modes, direct)
{
    make(direct);
    auto h = hold_lease();
    f().on_acquire(2, 20, false, at(20ms));
    take();
    f().on_deadline(2, at(30ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::complete_waiter}));
    BOOST_TEST(is_completed(v.at(0), 2, dlock::error::timeout));
    BOOST_TEST(stats.cancelled == 1u);
    f().on_deadline(2, at(31ms));  // gone: nothing
    f().on_deadline(42, at(31ms));
    BOOST_TEST(take().empty());
    f().on_release(h, 0, at(40ms));
    take();
    f().on_release_done(0, ok, true, at(41ms));
    check_idle();
}

// ======================================================================================
// store errors on attempts
// ======================================================================================

BOOST_AUTO_TEST_CASE(transient_error_retried_after_backoff)
{
    f().on_acquire(1, 10, false, t0);
    take();
    f().on_attempt_done(transient, {}, at(5ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::release, act::set_timer}));
    BOOST_TEST(is_release(v.at(0), "c:1", "", 0));  // it may have run: give it back
    BOOST_TEST(is_timer_within(v.at(1), at(7ms), at(10ms)));
    BOOST_TEST(f().state() == fsm_state::waiting);
    BOOST_TEST(stats.store_errors == 1u);
    f().on_release_done(0, transient, false, at(6ms));
    BOOST_TEST(stats.store_errors == 2u);
    fire();
    v = take();
    BOOST_TEST(seq_is(v, {act::attempt}));
    BOOST_TEST(is_attempt(v.at(0), "c:2", false));
    BOOST_TEST(stats.woken_by_timer == 0u);  // no watch was ready
    // a second error: the backoff doubles (10 ms step: [5, 10])
    f().on_attempt_done(dlock::error::server_busy, {}, at(20ms));
    v = take();
    BOOST_TEST(is_timer_within(v.at(1), at(25ms), at(30ms)));
    f().on_release_done(0, ok, false, at(21ms));
    fire();
    take();
    f().on_attempt_done(ok, won(4), at(40ms));
    v = take();
    BOOST_TEST(is_granted(v.at(2), 1, 1, 4));
    f().on_release(1, 0, at(50ms));
    take();
    f().on_release_done(0, ok, true, at(51ms));
    check_idle();
}

BOOST_AUTO_TEST_CASE(transient_error_on_a_queued_attempt_ends_the_wait_token)
{
    make(true);
    wait_for_lease(true);
    fire();
    BOOST_TEST(is_attempt(take().at(0), "c:2", true));
    f().on_attempt_done(transient, {}, at(410ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::release, act::unwatch, act::set_timer}));
    BOOST_TEST(is_release(v.at(0), "c:2", "", 0));
    BOOST_TEST(f().state() == fsm_state::waiting);  // no watch, asleep, not queued
    // a grant for the old token after the unwatch is ignored
    f().on_watch(watch_event::granted, grant(9), at(411ms));
    BOOST_TEST(take().empty());
    fire();
    v = take();
    BOOST_TEST(is_attempt(v.at(0), "c:3", false));  // a fresh token
    f().on_attempt_done(ok, busy(50ms), at(420ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::watch, act::set_timer}));
    BOOST_TEST(is_watch(v.at(0), "c:4"));
    f().on_cancel(1, aborted, at(421ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::unwatch, act::cancel_timer, act::complete_waiter}));  // not queued: no withdraw
    f().on_release_done(0, ok, false, at(422ms));
    check_idle();
}

BOOST_DATA_TEST_CASE_F(fixture, permanent_error_fails_every_waiter_without_retry, modes, direct)
{
    make(direct);
    f().on_acquire(1, 10, false, t0);
    take();
    f().on_acquire(2, 20, false, at(1ms));
    f().on_acquire(3, 30, true, at(1ms));  // try_once behind a waiter: answered at once
    BOOST_TEST(is_completed(take().at(0), 3, ok));
    f().on_attempt_done(permanent, {}, at(5ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::complete_waiter, act::complete_waiter}));
    BOOST_TEST(is_completed(v.at(0), 1, permanent));
    BOOST_TEST(is_completed(v.at(1), 2, permanent));
    BOOST_TEST(stats.store_errors == 1u);
    check_idle();
}

BOOST_AUTO_TEST_CASE(permanent_error_on_a_queued_attempt_withdraws)
{
    make(true);
    wait_for_lease(true);
    f().on_acquire(2, 20, false, at(100ms));
    fire();
    take();
    f().on_attempt_done(dlock::error::wrong_type, {}, at(410ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::unwatch, act::release, act::complete_waiter, act::complete_waiter}));
    BOOST_TEST(is_release(v.at(1), "c:2", "", 0));
    BOOST_TEST(is_completed(v.at(2), 1, dlock::error::wrong_type));
    BOOST_TEST(is_completed(v.at(3), 2, dlock::error::wrong_type));
    f().on_release_done(0, ok, false, at(411ms));
    check_idle();
}

BOOST_DATA_TEST_CASE_F(fixture, three_late_replies_in_a_row_fail_with_invalid_lease, modes, direct)
{
    make(direct);
    f().on_acquire(1, 10, false, t0);
    BOOST_TEST(is_attempt(take().at(0), "c:1", false));
    // sent at t0, lease to t0+2968: a reply at t0+2968 is too late
    f().on_attempt_done(ok, won(5), at(2968ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::release, act::attempt}));
    BOOST_TEST(is_release(v.at(0), "c:1", "", 0));
    BOOST_TEST(is_attempt(v.at(1), "c:2", false));
    BOOST_TEST(stats.late_replies == 1u);
    // a shorter granted ttl: sent at t0+2968, 100 ms granted, answered 70 ms later
    f().on_attempt_done(ok, won(6, "r", 100ms), at(2968ms + 70ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::release, act::attempt}));
    BOOST_TEST(is_attempt(v.at(1), "c:3", false));
    f().on_attempt_done(ok, won(7), at(9000ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::release, act::complete_waiter}));
    BOOST_TEST(is_release(v.at(0), "c:3", "", 0));
    BOOST_TEST(is_completed(v.at(1), 1, dlock::error::invalid_lease));
    BOOST_TEST(stats.late_replies == 3u);
    BOOST_TEST(f().in_flight() == 3u);
    for (int i = 0; i < 3; ++i)
        f().on_release_done(0, ok, true, at(9001ms));
    check_idle();
}

BOOST_AUTO_TEST_CASE(a_timely_reply_resets_the_late_count)
{
    f().on_acquire(1, 10, false, t0);
    take();
    f().on_attempt_done(ok, won(5), at(3000ms));
    take();
    f().on_attempt_done(ok, won(5), at(6000ms));
    take();
    f().on_attempt_done(ok, won(6), at(6010ms));  // in time: granted
    auto v = take();
    BOOST_TEST(is_granted(v.at(2), 1, 1, 6));
    f().on_release(1, 0, at(6020ms));
    take();
    f().on_acquire(2, 10, false, at(6030ms));
    take();
    f().on_attempt_done(ok, won(7), at(9030ms));
    take();
    f().on_attempt_done(ok, won(7), at(12030ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::release, act::attempt}));  // the count restarted: two, not four
    f().on_attempt_done(ok, won(8), at(12040ms));
    v = take();
    BOOST_TEST(is_granted(v.at(2), 2, 2, 8));
    f().on_release(2, 0, at(12050ms));
    take();
    for (int i = 0; i < 6; ++i)
        f().on_release_done(0, ok, true, at(12060ms));
    check_idle();
}

// ======================================================================================
// held / renewing / suspect / lost: the watchdog
// ======================================================================================

BOOST_DATA_TEST_CASE_F(fixture, renew_fails_twice_then_succeeds, modes, direct)
{
    make(direct);
    auto h = hold_lease();
    fire();  // t0+1010
    BOOST_TEST(is_renew(take().at(0), "c:1", "r"));
    f().on_renew_done(transient, {}, at(1015ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::event, act::set_timer}));
    BOOST_TEST(is_event(v.at(0), lock_event_kind::suspect, 7));
    BOOST_TEST(is_timer_within(v.at(1), at(1017ms), at(1020ms)));  // backoff [2, 5] ms
    BOOST_TEST(f().state() == fsm_state::suspect);
    BOOST_TEST(f().valid_until() == at(2968ms));
    // re-entry and watch events are fine while suspect
    f().on_acquire(2, 10, false, at(1016ms));
    BOOST_TEST(is_granted(take().at(0), 2, h + 1, 7));
    f().on_watch(watch_event::released, {}, at(1016ms));
    BOOST_TEST(take().empty());
    f().on_release(h + 1, 0, at(1016ms));
    BOOST_TEST(seq_is(take(), {act::complete_release}));

    fire();
    v = take();
    BOOST_TEST(seq_is(v, {act::renew, act::set_timer}));
    BOOST_TEST(is_timer(v.at(1), at(2968ms)));
    BOOST_TEST(f().state() == fsm_state::renewing);
    auto sent2 = *timer;
    (void)sent2;
    f().on_renew_done(dlock::error::timeout, {}, at(1100ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::set_timer}));  // no second suspect event
    BOOST_TEST(is_timer_within(v.at(0), at(1105ms), at(1110ms)));
    BOOST_TEST(f().state() == fsm_state::suspect);
    auto when = *timer;
    fire();
    BOOST_TEST(is_renew(take().at(0), "c:1", "r"));
    f().on_renew_done(ok, {.owned = true}, when + 5ms);
    v = take();
    BOOST_TEST(seq_is(v, {act::event, act::set_timer}));
    BOOST_TEST(is_event(v.at(0), lock_event_kind::renewed, 7));
    BOOST_TEST(is_timer(v.at(1), when + 1000ms));
    BOOST_TEST(f().valid_until() == when + 2968ms);
    BOOST_TEST(f().state() == fsm_state::held);
    BOOST_TEST(stats.suspect == 1u);
    BOOST_TEST(stats.renewals == 1u);
    BOOST_TEST(stats.store_errors == 2u);
    // a renewal failing later is a new suspect period
    fire();
    take();
    f().on_renew_done(transient, {}, when + 1001ms);
    BOOST_TEST(is_event(take().at(0), lock_event_kind::suspect, 7));
    BOOST_TEST(stats.suspect == 2u);
    f().on_release(h, 5, when + 1002ms);
    v = take();
    BOOST_TEST(seq_is(v, {act::event, act::release, act::cancel_timer}));
    f().on_release_done(5, ok, true, when + 1003ms);
    BOOST_TEST(is_released(take().at(0), 5, ok));
    check_idle();
}

BOOST_DATA_TEST_CASE_F(fixture, renew_fails_until_the_lease_ends, modes, direct)
{
    make(direct);
    auto h = hold_lease();
    int renewals = 0;
    for (int i = 0; i < 200 && !f().lost(); ++i) {
        BOOST_REQUIRE(timer.has_value());
        auto when = *timer;
        fire();
        auto v = take();
        if (!v.empty() && v.at(0).t == act::renew) {
            ++renewals;
            f().on_renew_done(transient, {}, when + 1ms);
            take();
        } else {
            BOOST_TEST(when == at(2968ms));
            BOOST_TEST(seq_is(v, {act::event, act::lost}));
            BOOST_TEST(is_event(v.at(0), lock_event_kind::lost, 7));
        }
    }
    BOOST_TEST(renewals > 3);
    BOOST_TEST(f().lost());
    BOOST_TEST(f().state() == fsm_state::lost);
    BOOST_TEST(f().valid_until() == time_point::min());
    BOOST_TEST(stats.lost == 1u);
    BOOST_TEST(stats.suspect == 1u);
    BOOST_TEST(!timer.has_value());
    BOOST_TEST(f().in_flight() == 0u);
    f().on_timer(at(5000ms));  // nothing armed
    BOOST_TEST(take().empty());
    f().on_release(h, 9, at(3000ms));
    auto v = take();
    // Lost by its local end only: deleted at the store in the background, if still ours.
    BOOST_TEST(seq_is(v, {act::release, act::complete_release}));
    BOOST_TEST(is_released(v.at(1), 9, dlock::error::lock_lost));
    f().on_release_done(0, ok, false, at(3001ms));
    check_idle();
}

BOOST_AUTO_TEST_CASE(renew_reply_after_the_lease_ended_is_ignored)
{
    auto h = hold_lease();
    fire();  // renew at t0+1010, timer at the lease's end
    take();
    fire();  // t0+2968: lost while the renewal runs
    auto v = take();
    BOOST_TEST(seq_is(v, {act::event, act::lost}));
    BOOST_TEST(f().state() == fsm_state::lost);
    BOOST_TEST(f().in_flight() == 1u);
    f().on_renew_done(ok, {.owned = true}, at(2970ms));
    BOOST_TEST(take().empty());
    BOOST_TEST(f().lost());
    f().on_release(h, 0, at(2980ms));
    BOOST_TEST(is_released(take().at(1), 0, dlock::error::lock_lost));
    f().on_release_done(0, ok, false, at(2990ms));
    check_idle();
}

BOOST_DATA_TEST_CASE_F(fixture, renew_not_owned_is_lost, modes, direct)
{
    make(direct);
    auto h = hold_lease();
    f().on_acquire(2, 20, false, at(20ms));  // another owner waits here
    take();
    fire();
    take();
    f().on_renew_done(ok, {.owned = false}, at(1015ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::event, act::lost, act::cancel_timer}));
    BOOST_TEST(is_event(v.at(0), lock_event_kind::lost, 7));
    BOOST_TEST(f().state() == fsm_state::lost);
    BOOST_TEST(stats.lost == 1u);
    BOOST_TEST(f().valid_until() == time_point::min());

    // lost × events: the holder's re-entry fails, other owners wait, try_once is "held"
    f().on_acquire(3, 10, false, at(1016ms));
    BOOST_TEST(is_completed(take().at(0), 3, dlock::error::lock_lost));
    f().on_acquire(4, 30, true, at(1016ms));
    BOOST_TEST(is_completed(take().at(0), 4, ok));
    f().on_acquire(5, 40, false, at(1016ms));
    BOOST_TEST(take().empty());
    f().on_deadline(5, at(1017ms));
    BOOST_TEST(is_completed(take().at(0), 5, dlock::error::timeout));
    f().on_watch(watch_event::released, {}, at(1017ms));
    f().on_watch(watch_event::granted, grant(3), at(1017ms));
    f().on_timer(at(9000ms));
    f().on_renew_done(ok, {.owned = true}, at(1017ms));
    f().on_session(session_event::lost, {}, at(1017ms));
    BOOST_TEST(take().empty());
    BOOST_TEST(stats.lost == 1u);

    // the last hold ends: lock_lost, and the waiter's attempt goes out with a fresh token
    f().on_release(h, 11, at(1020ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::complete_release, act::attempt}));
    BOOST_TEST(is_released(v.at(0), 11, dlock::error::lock_lost));
    BOOST_TEST(is_attempt(v.at(1), "c:2", false));
    f().on_attempt_done(ok, won(12), at(1025ms));
    v = take();
    BOOST_TEST(is_granted(v.at(2), 2, h + 1, 12));
    BOOST_TEST(f().state() == fsm_state::held);
    f().on_release(h + 1, 0, at(1030ms));
    take();
    f().on_release_done(0, ok, true, at(1031ms));
    check_idle();
}

BOOST_AUTO_TEST_CASE(lost_with_an_inner_hold)
{
    auto h = hold_lease();
    f().on_acquire(2, 10, false, at(20ms));
    take();
    fire();
    take();
    f().on_renew_done(ok, {.owned = false}, at(1015ms));
    take();
    f().on_release(h + 1, 3, at(1020ms));  // inner
    BOOST_TEST(is_released(take().at(0), 3, dlock::error::lock_lost));
    f().on_release(h, 4, at(1021ms));
    BOOST_TEST(is_released(take().at(0), 4, dlock::error::lock_lost));
    check_idle();
}

// A pause: the process sleeps past the lease's end and then releases.
BOOST_DATA_TEST_CASE_F(fixture, release_after_a_pause_is_lost, modes, direct)
{
    make(direct);
    auto h = hold_lease();
    f().on_release(h, 100, at(5000ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::event, act::lost, act::cancel_timer, act::release, act::complete_release}));
    BOOST_TEST(is_event(v.at(0), lock_event_kind::lost, 7));
    BOOST_TEST(is_released(v.at(4), 100, dlock::error::lock_lost));
    BOOST_TEST(stats.lost == 1u);
    // The paused holder's lease may live on at the store: deleted if still ours.
    BOOST_TEST(f().in_flight() == 1u);
    f().on_release_done(0, ok, true, at(5001ms));
    check_idle();
}

BOOST_AUTO_TEST_CASE(release_while_renewing_and_the_stale_renew_reply)
{
    auto h = hold_lease();
    fire();
    BOOST_TEST(seq_is(take(), {act::renew, act::set_timer}));
    f().on_release(h, 100, at(1020ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::event, act::release, act::cancel_timer}));
    BOOST_TEST(f().in_flight() == 2u);
    f().on_renew_done(ok, {.owned = true}, at(1021ms));
    BOOST_TEST(take().empty());
    f().on_release_done(100, ok, true, at(1022ms));
    BOOST_TEST(is_released(take().at(0), 100, ok));
    check_idle();
}

// The renewal of an earlier lease answers after a new lease of the same name was taken:
// the new lease's renewal must still be scheduled.
BOOST_AUTO_TEST_CASE(stale_renew_reply_after_a_new_lease_keeps_the_watchdog)
{
    auto h = hold_lease();
    fire();  // renew c:1 at t0+1010
    take();
    f().on_release(h, 0, at(1020ms));
    take();
    f().on_acquire(2, 10, false, at(1030ms));
    BOOST_TEST(is_attempt(take().at(0), "c:2", false));
    f().on_attempt_done(ok, won(8), at(1040ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::set_timer, act::event, act::complete_waiter}));
    BOOST_TEST(f().valid_until() == at(1030ms + 2968ms));
    // the old renewal answers (the store no longer knows c:1)
    f().on_renew_done(ok, {.owned = false}, at(1050ms));
    v = take();
    BOOST_TEST(!f().lost());
    BOOST_TEST(stats.lost == 0u);
    // the new lease is renewed before its end
    BOOST_REQUIRE(timer.has_value());
    BOOST_TEST(*timer <= at(2040ms));
    fire();
    v = take();
    BOOST_TEST(seq_is(v, {act::renew, act::set_timer}));
    BOOST_TEST(is_renew(v.at(0), "c:2", "r"));
    f().on_renew_done(ok, {.owned = true}, at(2050ms));
    take();
    BOOST_TEST(!f().lost());
    f().on_release(h + 1, 0, at(2060ms));
    take();
    f().on_release_done(0, ok, true, at(2061ms));
    f().on_release_done(0, ok, true, at(2061ms));
    check_idle();
}

BOOST_AUTO_TEST_CASE(no_watchdog_means_no_renewal)
{
    cfg.watchdog = false;
    make();
    f().on_acquire(1, 10, false, t0);
    take();
    f().on_attempt_done(ok, won(7), at(10ms));
    auto v = take();
    BOOST_TEST(is_timer(v.at(0), at(2968ms)));  // the lease's end, nothing before
    f().on_acquire(2, 20, false, at(20ms));
    take();
    // a fixed lease is never handed on locally: each holder gets a full term
    f().on_release(1, 0, at(30ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::event, act::release, act::cancel_timer, act::attempt}));
    BOOST_TEST(stats.handed_off == 0u);
    f().on_attempt_done(ok, won(8), at(40ms));
    v = take();
    BOOST_TEST(is_timer(v.at(0), at(30ms + 2968ms)));
    fire();
    v = take();
    BOOST_TEST(seq_is(v, {act::event, act::lost}));
    f().on_release(2, 0, at(3000ms));
    BOOST_TEST(is_released(take().at(1), 0, dlock::error::lock_lost));  // after the lost lease's delete
    f().on_release_done(0, ok, true, at(3001ms));
    f().on_release_done(0, ok, false, at(3002ms));
    check_idle();
}

// ======================================================================================
// release: local hand-off, budget, yield
// ======================================================================================

BOOST_DATA_TEST_CASE_F(fixture, local_handoff, modes, direct)
{
    make(direct);
    auto h = hold_lease();
    f().on_acquire(2, 20, false, at(20ms));
    f().on_acquire(3, 30, false, at(21ms));
    BOOST_TEST(take().empty());
    f().on_release(h, 100, at(30ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::event, act::complete_release, act::event, act::complete_waiter}));
    BOOST_TEST(is_event(v.at(0), lock_event_kind::released, 7));
    BOOST_TEST(is_released(v.at(1), 100, ok));
    BOOST_TEST(is_event(v.at(2), lock_event_kind::acquired, 7));
    BOOST_TEST(is_granted(v.at(3), 2, h + 1, 7));  // the same lease and fence, in arrival order
    BOOST_TEST(stats.handed_off == 1u);
    BOOST_TEST(f().in_flight() == 0u);
    // too close to the lease's end: back to the store, the next waiter attempts behind it
    f().on_release(h + 1, 101, at(2940ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::event, act::release, act::cancel_timer, act::attempt}));
    BOOST_TEST(is_release(v.at(1), "c:1", "r", 101));
    BOOST_TEST(is_attempt(v.at(3), "c:2", false));
    BOOST_TEST(f().in_flight() == 2u);
    f().on_release_done(101, ok, true, at(2941ms));
    BOOST_TEST(is_released(take().at(0), 101, ok));
    f().on_attempt_done(ok, won(8), at(2942ms));
    v = take();
    BOOST_TEST(is_granted(v.at(2), 3, h + 2, 8));
    f().on_release(h + 2, 0, at(2950ms));
    take();
    f().on_release_done(0, ok, true, at(2951ms));
    check_idle();
}

BOOST_AUTO_TEST_CASE(handoff_budget_forces_a_renewal)
{
    cfg.handoff_budget = 2;
    make();
    auto h = hold_lease();
    for (std::uint64_t w = 2; w <= 4; ++w)
        f().on_acquire(w, w * 10, false, at(20ms));
    take();
    f().on_release(h, 0, at(30ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::event, act::complete_release, act::event, act::complete_waiter}));
    f().on_release(h + 1, 0, at(40ms));  // the budget's second hand-off: renew now, not by the timer
    v = take();
    BOOST_TEST(
        seq_is(v, {act::event, act::renew, act::set_timer, act::complete_release, act::event, act::complete_waiter}));
    BOOST_TEST(is_renew(v.at(1), "c:1", "r"));
    BOOST_TEST(is_timer(v.at(2), at(2968ms)));  // the lease's end, while the renewal runs
    BOOST_TEST(stats.handed_off == 2u);
    f().on_timer(at(40ms));  // a stale expiry of the earlier deadline does nothing
    BOOST_TEST(take().empty());
    f().on_renew_done(ok, {.owned = true}, at(45ms));
    v = take();
    BOOST_TEST(is_timer(v.at(1), at(1040ms)));  // due again renew_every after that one
    BOOST_TEST(f().valid_until() == at(40ms + 2968ms));
    // the count restarted: the next hand-off does not renew
    f().on_release(h + 2, 0, at(50ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::event, act::complete_release, act::event, act::complete_waiter}));
    f().on_release(h + 3, 0, at(60ms));
    take();
    f().on_release_done(0, ok, true, at(61ms));
    check_idle();
}

// A read lease whose last reader leaves while a renewal is in flight still goes back at the
// next turn: the renewal's reply must not move the linger's timer to the next renewal
// (found by primitives_bench: 16 readers' lease stayed a third of a lease).
BOOST_AUTO_TEST_CASE(a_lingering_read_lease_goes_back_after_a_renewal_reply)
{
    cfg.shared = true;
    make();
    auto h = hold_lease();
    fire();  // the renewal is due
    auto v = take();
    BOOST_TEST(is_renew(v.at(0), "c:1", "r"));
    f().on_release(h, 0, at(1015ms));  // the last reader leaves: the lease lingers a turn
    v = take();
    BOOST_TEST(f().lingering());
    f().on_renew_done(ok, {.owned = true}, at(1016ms));
    take();
    BOOST_REQUIRE(timer.has_value());
    BOOST_TEST((*timer <= at(1016ms)));  // still the next turn, not the next renewal
    fire();
    v = take();
    BOOST_TEST(seq_is(v, {act::release}));
    BOOST_TEST(is_release(v.at(0), "c:1", "r", 0));
    f().on_release_done(0, ok, true, at(1017ms));
    check_idle();
}

BOOST_DATA_TEST_CASE_F(fixture, yield_after_a_contended_renewal, bdata::make({0, 500}), pause_us)
{
    cfg.yield_pause = std::chrono::microseconds(pause_us);
    make();
    auto h = hold_lease();
    f().on_acquire(2, 20, false, at(20ms));
    take();
    fire();
    take();
    f().on_renew_done(ok, {.owned = true, .contended = true}, at(1015ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::event, act::set_timer}));
    f().on_release(h, 100, at(1100ms));
    v = take();
    BOOST_TEST(is_release(v.at(1), "c:1", "r", 100));  // to the store, not handed on
    if (pause_us == 0) {
        BOOST_TEST(seq_is(v, {act::event, act::release, act::cancel_timer, act::attempt}));
    } else {
        BOOST_TEST(seq_is(v, {act::event, act::release, act::cancel_timer, act::set_timer}));
        BOOST_TEST(is_timer(v.at(3), at(1100ms) + 500us));
        BOOST_TEST(f().state() == fsm_state::waiting);
        fire();
        v = take();
        BOOST_TEST(seq_is(v, {act::attempt}));
    }
    BOOST_TEST(is_attempt(v.back(), "c:2", false));
    BOOST_TEST(stats.yielded == 1u);
    BOOST_TEST(stats.handed_off == 0u);
    f().on_release_done(100, ok, true, at(1101ms));
    take();
    f().on_attempt_done(ok, won(8), at(1102ms));
    v = take();
    BOOST_TEST(is_granted(v.at(2), 2, h + 1, 8));
    // the yield was spent: the next release with a waiter hands off locally again
    f().on_acquire(3, 30, false, at(1103ms));
    f().on_release(h + 1, 0, at(1104ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::event, act::complete_release, act::event, act::complete_waiter}));
    f().on_release(h + 2, 0, at(1105ms));
    take();
    f().on_release_done(0, ok, true, at(1106ms));
    check_idle();
}

BOOST_AUTO_TEST_CASE(yield_without_waiters_is_not_counted)
{
    auto h = hold_lease();
    fire();
    take();
    f().on_renew_done(ok, {.owned = true, .contended = true}, at(1015ms));
    take();
    f().on_release(h, 0, at(1100ms));
    BOOST_TEST(seq_is(take(), {act::event, act::release, act::cancel_timer}));
    BOOST_TEST(stats.yielded == 0u);
    f().on_release_done(0, ok, true, at(1101ms));
    check_idle();
}

// ======================================================================================
// release_done
// ======================================================================================

BOOST_AUTO_TEST_CASE(release_done_outcomes)
{
    // !owned on the first try, while the lease was still ours here: lock_lost, counted
    auto h = hold_lease();
    f().on_release(h, 1, at(100ms));
    take();
    f().on_release_done(1, ok, false, at(101ms));
    auto lost = take();
    BOOST_TEST(seq_is(lost, {act::event, act::complete_release}));
    BOOST_TEST(is_event(lost.at(0), lock_event_kind::lost, 7));
    BOOST_TEST(is_released(lost.at(1), 1, dlock::error::lock_lost));
    BOOST_TEST(stats.lost == 1u);
    check_idle();
    stats.lost = 0;

    // transient: asked again with a delay, then !owned (the first try did delete it): fine
    h = hold_lease(2);
    f().on_release(h, 2, at(100ms));
    take();
    f().on_release_done(2, transient, false, at(101ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::release}));
    BOOST_TEST(v.at(0).token == "c:2");
    BOOST_TEST(v.at(0).ref == "r");
    BOOST_TEST(v.at(0).id == 2u);
    BOOST_TEST((v.at(0).at >= at(101ms) + 5ms && v.at(0).at <= at(101ms) + 10ms));  // 10 ms step, jittered
    BOOST_TEST(f().in_flight() == 1u);
    f().on_release_done(2, ok, false, at(120ms));
    BOOST_TEST(is_released(take().at(0), 2, ok));
    check_idle();

    // transient until the lease's end: the error
    h = hold_lease(3);
    f().on_release(h, 3, at(100ms));
    take();
    f().on_release_done(3, transient, false, at(101ms));
    BOOST_TEST(seq_is(take(), {act::release}));
    f().on_release_done(3, transient, false, at(2968ms));
    BOOST_TEST(is_released(take().at(0), 3, transient));
    check_idle();

    // a bounded number of retries, each later than the one before (up to backoff_max)
    h = hold_lease(4);
    f().on_release(h, 4, at(100ms));
    take();
    int retries = 0;
    std::vector<fsm_action> r;
    for (; retries < 64; ++retries) {
        f().on_release_done(4, transient, false, at(101ms + ms(retries)));
        r = take();
        BOOST_REQUIRE(r.size() == 1u);
        if (r.at(0).t != act::release)
            break;
        BOOST_TEST(r.at(0).at > at(101ms + ms(retries)));
        BOOST_TEST(r.at(0).at <= at(101ms + ms(retries)) + cfg.backoff_max);
    }
    BOOST_TEST(retries >= 8);
    BOOST_TEST(retries < 64);
    BOOST_TEST(is_released(r.at(0), 4, transient));
    check_idle();

    // permanent: the error, no retry
    h = hold_lease(5);
    f().on_release(h, 5, at(100ms));
    take();
    f().on_release_done(5, permanent, false, at(101ms));
    BOOST_TEST(is_released(take().at(0), 5, permanent));
    check_idle();

    // unknown id: nothing
    auto errors = stats.store_errors;
    f().on_release_done(77, ok, true, at(102ms));
    BOOST_TEST(take().empty());
    // background release failing: counted, nothing else
    f().on_release_done(0, transient, false, at(103ms));
    BOOST_TEST(take().empty());
    BOOST_TEST(stats.store_errors == errors + 1);
    check_idle();
}

// Issue 29, item 5: a loss is judged by what was true when release() was called. Called
// while the lease was valid, with the reply delayed past the lease's local end (the server
// restarting meanwhile): whatever the reply says, no lock_lost, and nothing counted lost.
BOOST_AUTO_TEST_CASE(a_release_reply_after_the_lease_end_is_no_loss)
{
    for (bool owned : {false, true}) {
        auto h = hold_lease();
        f().on_release(h, 1, at(100ms));  // valid until 2968 ms
        BOOST_TEST(seq_is(take(), {act::event, act::release, act::cancel_timer}));
        f().on_timer(at(2968ms));  // nothing armed: the released lease is watched no more
        BOOST_TEST(take().empty());
        f().on_release_done(1, ok, owned, at(3100ms));
        auto v = take();
        BOOST_TEST(seq_is(v, {act::complete_release}));
        BOOST_TEST(is_released(v.at(0), 1, ok));
        BOOST_TEST(stats.lost == 0u);
        check_idle();
    }
    // A transient failure first, the retry's reply after the lease's end: no loss either.
    auto h = hold_lease();
    f().on_release(h, 2, at(100ms));
    take();
    f().on_release_done(2, transient, false, at(150ms));
    BOOST_TEST(seq_is(take(), {act::release}));
    f().on_release_done(2, ok, false, at(3100ms));
    BOOST_TEST(is_released(take().at(0), 2, ok));
    BOOST_TEST(stats.lost == 0u);
    check_idle();
}

// ... while a release after a real loss still reports lock_lost, counted once: by the
// watchdog's observation (the lease ran out before release() was called), or by the store's
// reply (gone while it was still valid here).
BOOST_AUTO_TEST_CASE(a_release_after_a_real_loss_is_lock_lost_counted_once)
{
    auto h = hold_lease();
    f().on_release(h, 1, at(3000ms));  // past valid_until (2968 ms): lost before release()
    auto v = take();
    BOOST_TEST(seq_is(v, {act::event, act::lost, act::cancel_timer, act::release, act::complete_release}));
    BOOST_TEST(is_released(v.at(4), 1, dlock::error::lock_lost));
    BOOST_TEST(stats.lost == 1u);
    f().on_release_done(0, ok, false, at(3001ms));  // the background delete: no second loss
    BOOST_TEST(stats.lost == 1u);
    check_idle();

    // lost by the watchdog (its renewal said not ours), then released: one loss
    h = hold_lease();
    fire();
    take();
    f().on_renew_done(ok, {.owned = false}, at(1020ms));
    take();
    BOOST_TEST(stats.lost == 2u);
    f().on_release(h, 2, at(1100ms));
    BOOST_TEST(is_released(take().at(0), 2, dlock::error::lock_lost));
    BOOST_TEST(stats.lost == 2u);
    check_idle();

    // gone at the store while valid here: the release's reply tells, counted once
    h = hold_lease();
    f().on_release(h, 3, at(100ms));
    take();
    f().on_release_done(3, ok, false, at(2900ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::event, act::complete_release}));
    BOOST_TEST(is_released(v.at(1), 3, dlock::error::lock_lost));
    BOOST_TEST(stats.lost == 3u);
    check_idle();
}

// A release nobody waits for (release_id 0, a guard's destructor) is a background release:
// answered with id 0 like the others, it must not stay in flight.
BOOST_DATA_TEST_CASE_F(fixture, release_with_id_0_is_a_background_release, modes, direct)
{
    make(direct);
    auto h = hold_lease();
    f().on_release(h, 0, at(100ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::event, act::release, act::cancel_timer}));
    BOOST_TEST(is_release(v.at(1), "c:1", "r", 0));
    BOOST_TEST(f().in_flight() == 1u);
    auto errors = stats.store_errors;
    f().on_release_done(0, transient, false, at(101ms));  // counted, not retried
    BOOST_TEST(take().empty());
    BOOST_TEST(stats.store_errors == errors + 1);
    check_idle();

    // with a cancelled attempt's background release in flight too: two answers for id 0
    f().on_acquire(2, 10, false, at(200ms));
    take();
    f().on_attempt_done(ok, won(8), at(210ms));
    h = take().at(2).hold;
    f().on_acquire(3, 20, false, at(220ms));
    f().on_cancel(3, aborted, at(221ms));
    take();
    f().on_release(h, 0, at(230ms));
    take();
    f().on_acquire(4, 30, false, at(231ms));
    BOOST_TEST(is_attempt(take().at(0), "c:3", false));
    f().on_cancel(4, aborted, at(232ms));
    BOOST_TEST(seq_is(take(), {act::release, act::complete_waiter}));
    BOOST_TEST(f().in_flight() == 3u);
    f().on_release_done(0, ok, true, at(233ms));
    f().on_attempt_done(ok, busy(), at(234ms));
    f().on_release_done(0, ok, false, at(235ms));
    BOOST_TEST(take().empty());
    check_idle();
}

// Inputs with nothing to answer: no attempt, renewal or watch in flight.
BOOST_DATA_TEST_CASE_F(fixture, stray_inputs_do_nothing, modes, direct)
{
    make(direct);
    f().on_attempt_done(ok, won(1), t0);
    f().on_renew_done(ok, {.owned = true}, t0);
    f().on_watch(watch_event::released, {}, t0);
    f().on_watch(watch_event::granted, grant(1), t0);
    f().on_session(session_event::lost, {}, t0);
    f().on_cancel(1, aborted, t0);
    f().on_deadline(1, t0);
    f().on_release_done(5, ok, true, t0);
    BOOST_TEST(take().empty());
    check_idle();
    auto h = hold_lease();
    f().on_attempt_done(ok, won(1), at(20ms));
    f().on_renew_done(transient, {}, at(20ms));
    BOOST_TEST(take().empty());
    BOOST_TEST(f().state() == fsm_state::held);
    f().on_release(h, 3, at(30ms));
    take();
    f().on_release_done(3, ok, true, at(31ms));
    take();
    check_idle();
}

// Renewing × acquire and local hand-off: the renewal in flight is of the same lease.
BOOST_AUTO_TEST_CASE(handoff_while_renewing)
{
    auto h = hold_lease();
    fire();
    BOOST_TEST(seq_is(take(), {act::renew, act::set_timer}));
    f().on_acquire(2, 10, false, at(1011ms));  // re-entry while renewing
    BOOST_TEST(is_granted(take().at(0), 2, h + 1, 7));
    f().on_acquire(3, 20, false, at(1012ms));
    BOOST_TEST(take().empty());
    f().on_release(h + 1, 0, at(1013ms));
    BOOST_TEST(seq_is(take(), {act::complete_release}));
    f().on_release(h, 0, at(1014ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::event, act::complete_release, act::event, act::complete_waiter}));
    BOOST_TEST(is_granted(v.at(3), 3, h + 2, 7));
    BOOST_TEST(f().state() == fsm_state::renewing);
    f().on_renew_done(ok, {.owned = true}, at(1020ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::event, act::set_timer}));
    BOOST_TEST(is_event(v.at(0), lock_event_kind::renewed, 7));
    BOOST_TEST(f().valid_until() == at(1010ms + 2968ms));
    f().on_release(h + 2, 0, at(1030ms));
    take();
    f().on_release_done(0, ok, true, at(1031ms));
    check_idle();
}

// A contended renewal asks to yield the lease at its next release; if that lease is lost
// first, the next lease must not inherit the request.
BOOST_AUTO_TEST_CASE(yield_request_does_not_outlive_its_lease)
{
    auto h = hold_lease();
    fire();
    take();
    f().on_renew_done(ok, {.owned = true, .contended = true}, at(1015ms));
    take();
    fire();
    take();
    f().on_renew_done(ok, {.owned = false}, at(2015ms));
    BOOST_TEST(seq_is(take(), {act::event, act::lost, act::cancel_timer}));
    f().on_release(h, 0, at(2020ms));
    BOOST_TEST(is_released(take().at(0), 0, dlock::error::lock_lost));
    check_idle();
    // a new lease, uncontended: a release with a local waiter hands off locally
    f().on_acquire(2, 10, false, at(3000ms));
    take();
    f().on_attempt_done(ok, won(8), at(3010ms));
    h = take().at(2).hold;
    f().on_acquire(3, 20, false, at(3020ms));
    f().on_release(h, 0, at(3030ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::event, act::complete_release, act::event, act::complete_waiter}));
    BOOST_TEST(stats.yielded == 0u);
    BOOST_TEST(stats.handed_off == 1u);
    f().on_release(h + 1, 0, at(3040ms));
    take();
    f().on_release_done(0, ok, true, at(3041ms));
    check_idle();
}

// ======================================================================================
// per-session stores: session events
// ======================================================================================

BOOST_AUTO_TEST_CASE(session_events)
{
    cfg.per_session = true;
    make();
    f().on_session(session_event::suspect, {.generation = 5}, t0);  // no lease: ignored
    BOOST_TEST(take().empty());
    f().on_acquire(1, 10, false, t0);
    take();
    f().on_attempt_done(ok, won(7, "r", 0ms, 5), at(10ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::set_timer, act::event, act::complete_waiter}));
    BOOST_TEST(is_timer(v.at(0), at(2968ms)));                            // no per-name renewal: the lease's end
    f().on_session(session_event::suspect, {.generation = 4}, at(20ms));  // another session
    BOOST_TEST(take().empty());
    f().on_session(session_event::suspect, {.generation = 5}, at(20ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::event}));
    BOOST_TEST(is_event(v.at(0), lock_event_kind::suspect, 7));
    BOOST_TEST(f().state() == fsm_state::suspect);
    f().on_session(session_event::suspect, {.generation = 5}, at(21ms));
    BOOST_TEST(take().empty());
    BOOST_TEST(stats.suspect == 1u);
    f().on_session(session_event::restored, {.generation = 5, .valid_until = at(9000ms)}, at(30ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::set_timer}));
    BOOST_TEST(is_timer(v.at(0), at(9000ms)));
    BOOST_TEST(f().state() == fsm_state::held);
    BOOST_TEST(f().valid_until() == at(9000ms));
    f().on_session(session_event::up, {.generation = 5, .valid_until = at(9500ms)}, at(40ms));
    BOOST_TEST(is_timer(take().at(0), at(9500ms)));
    f().on_timer(at(5000ms));  // stale
    BOOST_TEST(take().empty());
    f().on_acquire(2, 20, false, at(50ms));
    take();
    f().on_session(session_event::lost, {.generation = 5}, at(60ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::event, act::lost, act::cancel_timer}));
    BOOST_TEST(f().state() == fsm_state::lost);
    BOOST_TEST(stats.lost == 1u);
    f().on_session(session_event::restored, {.generation = 5, .valid_until = at(9900ms)}, at(61ms));
    BOOST_TEST(take().empty());
    f().on_release(1, 0, at(70ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::complete_release, act::attempt}));
    f().on_attempt_done(ok, won(8, "r", 0ms, 6), at(80ms));
    v = take();
    BOOST_TEST(is_granted(v.at(2), 2, 2, 8));
    // the lease's end passes with no confirmation: lost by the timer
    fire();
    v = take();
    BOOST_TEST(seq_is(v, {act::event, act::lost}));
    f().on_release(2, 0, at(4000ms));
    take();
    f().on_release_done(0, ok, false, at(4001ms));  // the lost lease's background delete
    check_idle();
}

// A per-session store that confirms leases (etcd): the watchdog asks on its schedule; a
// confirmation does not move the lease's end (the session's events do); "not owned" is a loss.
BOOST_AUTO_TEST_CASE(session_store_confirms_each_lease)
{
    cfg.per_session = true;
    cfg.confirms = true;
    make();
    f().on_acquire(1, 10, false, t0);
    take();
    f().on_attempt_done(ok, won(7, "k", 2500ms, 5), at(10ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::set_timer, act::event, act::complete_waiter}));
    BOOST_TEST(is_timer(v.at(0), at(1010ms)));    // the first confirmation
    BOOST_TEST(f().valid_until() == at(2468ms));  // send time + granted - drift
    fire();
    v = take();
    BOOST_TEST(seq_is(v, {act::renew, act::set_timer}));
    BOOST_TEST(is_renew(v.at(0), "c:1", "k"));
    f().on_renew_done(ok, {.owned = true}, at(1020ms));
    v = take();
    BOOST_TEST(seq_is(v, {act::event, act::set_timer}));
    BOOST_TEST(f().valid_until() == at(2468ms));  // not moved by the confirmation
    BOOST_TEST(is_timer(v.at(1), at(2010ms)));
    f().on_session(session_event::restored, {.generation = 5, .valid_until = at(4000ms)}, at(1500ms));
    take();
    BOOST_TEST(f().valid_until() == at(4000ms));  // the session moves it
    fire();
    v = take();
    BOOST_TEST(seq_is(v, {act::renew, act::set_timer}));
    f().on_renew_done(ok, {.owned = false}, at(2020ms));  // an operator deleted the key
    v = take();
    BOOST_TEST(seq_is(v, {act::event, act::lost, act::cancel_timer}));
    BOOST_TEST(f().state() == fsm_state::lost);
    BOOST_TEST(stats.lost == 1u);
    f().on_release(1, 0, at(2100ms));
    take();
    f().on_release_done(0, ok, false, at(2110ms));
    check_idle();
}

// Issue 29: a lease handed over by a per-session store (etcd, ZooKeeper) lives by its
// session like an acquired one: the session's events move its end. It was granted with
// session 0, so no event matched it and it was lost one lease after the hand-off.
BOOST_AUTO_TEST_CASE(a_handed_lease_follows_its_session)
{
    queue_on_a_session_store();
    auto g = grant(9, 3000ms, "g");
    g.session = 5;
    f().on_watch(watch_event::granted, g, at(300ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::unwatch, act::cancel_timer, act::set_timer, act::event, act::complete_waiter}));
    BOOST_TEST(f().valid_until() == at(2974ms));
    // Three leases on, its session confirmed all along: still held.
    time_point when = at(300ms);
    for (int i = 0; i < 9; ++i) {
        BOOST_REQUIRE(timer.has_value());
        when = *timer;
        fire();
        v = take();
        if (std::any_of(v.begin(), v.end(), [](auto& a) { return a.t == act::renew; })) {
            f().on_session(session_event::up, {.generation = 5, .valid_until = when + 2500ms}, when + 1ms);
            f().on_renew_done(ok, {.owned = true}, when + 1ms);
            take();
        }
        BOOST_TEST(!f().lost());
    }
    BOOST_TEST(when > at(9000ms));
    BOOST_TEST(f().valid_until() == when + 2500ms);
    BOOST_TEST(stats.lost == 0u);
    f().on_release(1, 0, when + 10ms);
    v = take();
    BOOST_TEST(seq_is(v, {act::event, act::release, act::cancel_timer}));
    f().on_release_done(0, ok, true, when + 20ms);
    check_idle();
}

// A per-session store's grant that does not say its session is confirmed by an attempt,
// whose reply does.
BOOST_AUTO_TEST_CASE(a_handed_lease_without_its_session_is_confirmed)
{
    queue_on_a_session_store();
    f().on_watch(watch_event::granted, grant(9, 3000ms, "g"), at(300ms));
    auto v = take();
    BOOST_TEST(seq_is(v, {act::cancel_timer, act::attempt}));
    BOOST_TEST(is_attempt(v.at(1), "c:2", true));
    f().on_attempt_done(ok, won(9, "g", 2800ms, 5), at(310ms));
    take();
    f().on_session(session_event::up, {.generation = 5, .valid_until = at(5000ms)}, at(1000ms));
    take();
    BOOST_TEST(f().valid_until() == at(5000ms));
    f().on_release(1, 0, at(1100ms));
    take();
    f().on_release_done(0, ok, true, at(1110ms));
    check_idle();
}

// ======================================================================================
// timers: stale fires do nothing, in every state that arms one
// ======================================================================================

BOOST_DATA_TEST_CASE_F(fixture, stale_timers_do_nothing, modes, direct)
{
    make(direct);
    f().on_timer(t0);  // free, nothing armed
    BOOST_TEST(take().empty());
    f().on_acquire(1, 10, false, t0);
    take();
    f().on_timer(at(1ms));  // attempting: nothing armed
    BOOST_TEST(take().empty());
    BOOST_TEST(f().state() == fsm_state::attempting);
    f().on_attempt_done(ok, busy(500ms), at(5ms));
    take();
    f().on_timer(at(505ms));  // armed for t0+506: early, so stale
    BOOST_TEST(take().empty());
    BOOST_TEST(f().state() == fsm_state::waiting);
    f().on_watch(watch_event::ready, {}, at(6ms));
    take();
    f().on_timer(at(506ms));  // the cancelled one firing anyway
    BOOST_TEST(take().empty());
    f().on_attempt_done(ok, won(7), at(10ms));
    auto v = take();
    BOOST_TEST(is_timer(v.at(1), at(1010ms)));
    f().on_timer(at(1009ms));  // held: early
    BOOST_TEST(take().empty());
    BOOST_TEST(f().state() == fsm_state::held);
    fire();
    take();
    f().on_timer(at(1011ms));  // renewing: armed for the lease's end
    BOOST_TEST(take().empty());
    BOOST_TEST(f().state() == fsm_state::renewing);
    f().on_renew_done(ok, {.owned = true}, at(1020ms));
    take();
    f().on_release(1, 0, at(1030ms));
    take();
    f().on_timer(at(2010ms));  // cancelled by the release
    BOOST_TEST(take().empty());
    f().on_release_done(0, ok, true, at(1031ms));
    check_idle();
}

BOOST_AUTO_TEST_SUITE_END()
