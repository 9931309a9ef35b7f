// SPDX-License-Identifier: BSL-1.0
// The store contract suite, shared by every store's test file: run_contract() drives one
// store through the contract's checks.
#pragma once

#include <dlock/core.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

namespace dlock::test {

namespace asio = boost::asio;
using namespace std::chrono_literals;

// Polls `pred` every 2 ms for up to a second (the store's callbacks run meanwhile).
template <class Pred>
asio::awaitable<bool> eventually_true(Pred pred)
{
    asio::steady_timer t(co_await asio::this_coro::executor);
    for (int i = 0; i < 500 && !pred(); ++i) {
        t.expires_after(2ms);
        co_await t.async_wait(asio::use_awaitable);
    }
    co_return pred();
}

// What every store must describe about itself, and the lease limits it announces.
inline asio::awaitable<void> check_traits(dlock::store& st, const std::string& name)
{
    BOOST_TEST(!st.describe().empty());
    BOOST_TEST(st.describe().find('\n') == std::string::npos);
    auto tr = st.traits();
    BOOST_TEST((tr.kinds & static_cast<unsigned>(dlock::lease_kind::mutex)) != 0u);
    BOOST_TEST(tr.min_ttl.count() >= 1);
    BOOST_TEST(tr.max_ttl >= tr.min_ttl);
    BOOST_TEST(st.direct_handoff() == tr.direct_handoff);
    if (tr.ttl_granularity > 1ms) {
        // A lease that is not a whole number of the store's unit is refused, not rounded.
        auto [ec, r] = co_await st.async_try_acquire(name, "odd", tr.min_ttl + tr.ttl_granularity / 2,
                                                     asio::as_tuple(asio::use_awaitable));
        BOOST_TEST(ec == dlock::error::invalid_lease);
        BOOST_TEST(!r.acquired);
    }
    if (tr.max_ttl < std::chrono::milliseconds::max()) {
        // Refused before anything is sent, and nothing was taken.
        auto [ec, r] =
            co_await st.async_try_acquire(name, "too-long", tr.max_ttl + 1ms, asio::as_tuple(asio::use_awaitable));
        BOOST_TEST(ec == dlock::error::invalid_lease);
        BOOST_TEST(!r.acquired);
        auto [ec2, r2] = co_await st.async_try_acquire(name, "too-long", std::chrono::milliseconds::max() / 2,
                                                       asio::as_tuple(asio::use_awaitable));
        BOOST_TEST(ec2 == dlock::error::invalid_lease);
        auto s = co_await st.async_status(name, asio::use_awaitable);
        BOOST_TEST(!s.held);
    }
}

// No callback reaches a watch after unwatch() returned: not the posted `ready` of a watch
// just made, not a release already on its way.
inline asio::awaitable<void> check_unwatch(dlock::store& st, const std::string& name)
{
    int early = 0;
    st.unwatch(st.watch(name, [&](dlock::watch_event) { ++early; }));
    int late = 0;
    bool ready = false, stopped = false;
    auto id = st.watch(name, [&](dlock::watch_event ev) {
        BOOST_TEST(!stopped);
        ready = ready || ev == dlock::watch_event::ready;
        ++late;
    });
    BOOST_REQUIRE(co_await eventually_true([&] { return ready; }));
    BOOST_TEST((co_await st.async_try_acquire(name, "unwatch-a", 5s, asio::use_awaitable)).acquired);
    BOOST_TEST((co_await st.async_release(name, "unwatch-a", asio::use_awaitable)));
    st.unwatch(id);  // the release's notification may still be on its way
    stopped = true;
    int seen = late;
    co_await eventually_true([] { return false; });  // a second for any stray callback
    BOOST_TEST(early == 0);
    BOOST_TEST(late == seen);
}

// The direct hand-off half: a queued, watched token gets the name at the holder's release.
inline asio::awaitable<void> check_handoff(dlock::store& st, const std::string& name)
{
    auto a = co_await st.async_try_acquire(name, "hold-a", 5s, asio::use_awaitable);
    BOOST_REQUIRE(a.acquired);
    std::vector<std::pair<dlock::watch_event, dlock::grant_notice>> got;
    auto w =
        st.watch(name, "wait-w", [&](dlock::watch_event ev, const dlock::grant_notice& g) { got.emplace_back(ev, g); });
    BOOST_REQUIRE(co_await eventually_true([&] { return !got.empty(); }));
    BOOST_TEST((got.front().first == dlock::watch_event::ready));
    dlock::lease_request q{name, "wait-w", 4s};
    q.queue = true;
    auto r = co_await st.async_try_acquire(q, asio::use_awaitable);
    BOOST_TEST(!r.acquired);
    BOOST_TEST((co_await st.async_status(name, asio::use_awaitable)).queued == 1u);
    // The holder's release hands the name on with a new, larger fencing token.
    BOOST_TEST((co_await st.async_release(name, "hold-a", asio::use_awaitable)));
    auto granted = [&]() -> const dlock::grant_notice* {
        for (auto& [ev, g] : got)
            if (ev == dlock::watch_event::granted)
                return &g;
        return nullptr;
    };
    BOOST_REQUIRE(co_await eventually_true([&] { return granted() != nullptr; }));
    auto notice = *granted();
    BOOST_TEST(notice.fencing_token > a.fencing_token);
    if (st.traits().live == dlock::liveness::per_session)
        BOOST_TEST((notice.ttl.count() > 2000 && notice.ttl.count() <= 4000), notice.ttl.count());
    else
        BOOST_TEST(notice.ttl.count() == 4000);
    auto s = co_await st.async_status(name, asio::use_awaitable);
    BOOST_TEST(s.held);
    BOOST_TEST(s.holder == "wait-w");
    BOOST_TEST(s.fencing_token == notice.fencing_token);
    BOOST_TEST(s.queued == 0u);
    // The new holder confirms it with the same token.
    auto mine = co_await st.async_try_acquire(q, asio::use_awaitable);
    BOOST_TEST(mine.acquired);
    BOOST_TEST(mine.fencing_token == notice.fencing_token);

    // A queued token that releases without holding is withdrawn: nobody gets the name.
    std::vector<dlock::watch_event> x_events;
    auto x =
        st.watch(name, "wait-x", [&](dlock::watch_event ev, const dlock::grant_notice&) { x_events.push_back(ev); });
    BOOST_REQUIRE(co_await eventually_true([&] { return !x_events.empty(); }));
    dlock::lease_request qx{name, "wait-x", 4s};
    qx.queue = true;
    BOOST_TEST(!(co_await st.async_try_acquire(qx, asio::use_awaitable)).acquired);
    BOOST_TEST((co_await st.async_status(name, asio::use_awaitable)).queued == 1u);
    BOOST_TEST(!(co_await st.async_release(name, "wait-x", asio::use_awaitable)));
    BOOST_TEST((co_await st.async_status(name, asio::use_awaitable)).queued == 0u);
    BOOST_TEST((co_await st.async_release(name, "wait-w", asio::use_awaitable)));
    BOOST_TEST(co_await eventually_true(
        [&] { return std::count(x_events.begin(), x_events.end(), dlock::watch_event::released) > 0; }));
    BOOST_TEST(std::count(x_events.begin(), x_events.end(), dlock::watch_event::granted) == 0);
    BOOST_TEST(!(co_await st.async_status(name, asio::use_awaitable)).held);
    st.unwatch(x);
    st.unwatch(w);
}

// The server's keys of one name (empty: the store cannot list them).
using keys_of_fn = std::function<std::vector<std::string>(const std::string& name)>;

// One name, two primitives, two clients of one server: whoever holds the name as one kind,
// the other client's ask for another kind is refused with kind_mismatch, and the store's
// text names the kind in use; once released, the other kind works, and no key is left.
// `mx` takes the mutex; `other` (a second client, or `mx` itself for a store without a
// server) the read-write lock and the semaphore, each where one of them serves it.
// (Requests and keys are named locals: g++ 12 mishandles aggregate temporaries that live
// across a co_await.)
inline asio::awaitable<bool> refused_as(dlock::store& st, const dlock::lease_request& r, const std::string& in_use)
{
    auto [ec, got] = co_await st.async_try_acquire(r, asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(ec == dlock::error::kind_mismatch, r.token << ": " << ec.message());
    BOOST_TEST(!got.acquired);
    BOOST_TEST(st.last_error_text().find(in_use) != std::string::npos, r.token << ": " << st.last_error_text());
    co_return ec == dlock::error::kind_mismatch && !got.acquired;
}

inline asio::awaitable<void> check_kinds(dlock::store& mx, dlock::store& other, const keys_of_fn& keys_of,
                                         const std::string& name)
{
    using dlock::lease_kind;
    constexpr unsigned rw_kinds = static_cast<unsigned>(lease_kind::read) | static_cast<unsigned>(lease_kind::write);
    constexpr unsigned sem_kinds = static_cast<unsigned>(lease_kind::permit);
    auto serving = [&](unsigned kinds) -> dlock::store* {
        return (other.traits().kinds & kinds) == kinds ? &other : (mx.traits().kinds & kinds) == kinds ? &mx : nullptr;
    };
    dlock::store* rw = serving(rw_kinds);
    dlock::store* sem = serving(sem_kinds);
    if (!rw && !sem)
        co_return;  // only mutexes here: nothing to mix up
    const bool mx_rw = (mx.traits().kinds & rw_kinds) == rw_kinds;
    const bool mx_sem = (mx.traits().kinds & sem_kinds) == sem_kinds;
    // Nothing left: no key the server lists, and no holder the store tells of.
    auto left_empty = [&](dlock::store& st) -> asio::awaitable<void> {
        BOOST_TEST((keys_of ? keys_of(name) : std::vector<std::string>{}).empty(), name << ": keys left behind");
        BOOST_TEST(!(co_await st.async_status(name, asio::use_awaitable)).held, name << ": still held");
    };
    const dlock::lease_request m{name, "kind-m", 5s, lease_kind::mutex, 1, false};
    const dlock::lease_request rd{name, "kind-r", 5s, lease_kind::read, 1, false};
    const dlock::lease_request wr{name, "kind-w", 5s, lease_kind::write, 1, false};
    const dlock::lease_request p2{name, "kind-p", 5s, lease_kind::permit, 2, false};
    const dlock::lease_request p3{name, "kind-p3", 5s, lease_kind::permit, 3, false};
    const dlock::lease_key m_key{name, "kind-m", {}, lease_kind::mutex};
    const dlock::lease_key rd_key{name, "kind-r", {}, lease_kind::read};
    const dlock::lease_key wr_key{name, "kind-w", {}, lease_kind::write};
    const dlock::lease_key p2_key{name, "kind-p", {}, lease_kind::permit};
    const std::string as_mutex = "a mutex", as_sem = "a semaphore of 2 permits", as_rw = "a read-write lock";

    // Held as a mutex: neither side of a read-write lock nor a semaphore's permit.
    auto held = co_await mx.async_try_acquire(m, asio::use_awaitable);
    BOOST_TEST_REQUIRE(held.acquired);
    if (rw) {
        co_await refused_as(*rw, rd, as_mutex);
        co_await refused_as(*rw, wr, as_mutex);
    }
    if (sem)
        co_await refused_as(*sem, p2, as_mutex);
    BOOST_TEST((co_await mx.async_release(m_key, asio::use_awaitable)));
    co_await left_empty(mx);

    if (sem) {  // Held as a semaphore of 2: not a mutex, not a read-write lock, not a semaphore of 3.
        auto p = co_await sem->async_try_acquire(p2, asio::use_awaitable);
        BOOST_TEST_REQUIRE(p.acquired);
        co_await refused_as(mx, m, as_sem);
        co_await refused_as(mx, m, as_sem);  // still, and nothing changed by the first refusal
        if (mx_rw)
            co_await refused_as(mx, rd, as_sem);
        if (mx_sem)
            co_await refused_as(mx, p3, as_sem);
        BOOST_TEST((co_await sem->async_release(p2_key, asio::use_awaitable)));
        co_await left_empty(*sem);
    }

    if (rw) {  // Held as a read-write lock (by a reader, then a writer): not a mutex, not a semaphore.
        auto r = co_await rw->async_try_acquire(rd, asio::use_awaitable);
        BOOST_TEST_REQUIRE(r.acquired);
        co_await refused_as(mx, m, as_rw);
        co_await refused_as(mx, m, as_rw);  // still, and nothing changed by the first refusal
        if (mx_sem)
            co_await refused_as(mx, p2, as_rw);
        BOOST_TEST((co_await rw->async_release(rd_key, asio::use_awaitable)));
        co_await left_empty(*rw);
        auto w = co_await rw->async_try_acquire(wr, asio::use_awaitable);
        BOOST_TEST_REQUIRE(w.acquired);
        co_await refused_as(mx, m, as_rw);
        BOOST_TEST((co_await rw->async_release(wr_key, asio::use_awaitable)));
        co_await left_empty(*rw);
    }

    // Free again: any kind may have it.
    auto again = co_await mx.async_try_acquire(m, asio::use_awaitable);
    BOOST_TEST(again.acquired);
    BOOST_TEST((co_await mx.async_release(m_key, asio::use_awaitable)));
    if (rw) {
        auto w = co_await rw->async_try_acquire(wr, asio::use_awaitable);
        BOOST_TEST(w.acquired);
        BOOST_TEST((co_await rw->async_release(wr_key, asio::use_awaitable)));
    }
    co_await left_empty(mx);
}

// The operator's override of one side of a read-write lock (Redisson's per-side forceUnlock):
// the readers' frees every reader and never the writer, the writer's the writer only; each
// freed holder's renewal then fails; a mutex's name has no sides. A store without read-write
// locks answers not_supported.
inline asio::awaitable<void> check_force_sides(dlock::store& st, const keys_of_fn& keys_of, const std::string& name)
{
    using dlock::lease_kind;
    constexpr unsigned rw_kinds = static_cast<unsigned>(lease_kind::read) | static_cast<unsigned>(lease_kind::write);
    if ((st.traits().kinds & rw_kinds) != rw_kinds) {
        auto [ec, held] = co_await st.async_force_release(name, lease_kind::read, asio::as_tuple(asio::use_awaitable));
        BOOST_TEST(ec == dlock::error::not_supported, ec.message());
        BOOST_TEST(!held);
        co_return;
    }
    const dlock::lease_request r1{name, "side-r1", 5s, lease_kind::read, 1, false};
    const dlock::lease_request r2{name, "side-r2", 5s, lease_kind::read, 1, false};
    const dlock::lease_request r3{name, "side-r3", 5s, lease_kind::read, 1, false};  // a new lease: a new token
    const dlock::lease_request w{name, "side-w", 5s, lease_kind::write, 1, false};
    const dlock::lease_request m{name, "side-m", 5s, lease_kind::mutex, 1, false};
    auto force = [&](lease_kind side) -> asio::awaitable<bool> {
        auto [ec, held] = co_await st.async_force_release(name, side, asio::as_tuple(asio::use_awaitable));
        BOOST_TEST(!ec, ec.message());
        co_return held;
    };
    auto holders = [&]() -> asio::awaitable<std::size_t> {
        auto s = co_await st.async_status(name, asio::use_awaitable);
        co_return s.held ? std::max<std::size_t>(s.holders, 1) : 0;
    };

    // Two readers: the writer's side frees nothing, the readers' side frees both.
    auto a = co_await st.async_try_acquire(r1, asio::use_awaitable);
    auto b = co_await st.async_try_acquire(r2, asio::use_awaitable);
    BOOST_TEST_REQUIRE((a.acquired && b.acquired));
    BOOST_TEST(!(co_await force(lease_kind::write)));
    BOOST_TEST((co_await holders()) == 2u);
    BOOST_TEST((co_await force(lease_kind::read)));
    BOOST_TEST((co_await holders()) == 0u);
    const dlock::lease_key a_key{name, "side-r1", a.lease_ref, lease_kind::read};
    BOOST_TEST(!(co_await st.async_renew(a_key, 5s, asio::use_awaitable)).owned);

    // A writer: the readers' side frees nothing, the writer's side frees it.
    auto c = co_await st.async_try_acquire(w, asio::use_awaitable);
    BOOST_TEST_REQUIRE(c.acquired);
    BOOST_TEST(!(co_await force(lease_kind::read)));
    BOOST_TEST((co_await holders()) == 1u);
    BOOST_TEST((co_await force(lease_kind::write)));
    BOOST_TEST((co_await holders()) == 0u);
    const dlock::lease_key c_key{name, "side-w", c.lease_ref, lease_kind::write};
    BOOST_TEST(!(co_await st.async_renew(c_key, 5s, asio::use_awaitable)).owned);
    auto d = co_await st.async_try_acquire(r3, asio::use_awaitable);  // free again for a reader
    BOOST_TEST(d.acquired);
    const dlock::lease_key d_key{name, "side-r3", d.lease_ref, lease_kind::read};
    BOOST_TEST((co_await st.async_release(d_key, asio::use_awaitable)));

    // A mutex's name has no sides: neither frees it.
    auto e = co_await st.async_try_acquire(m, asio::use_awaitable);
    BOOST_TEST_REQUIRE(e.acquired);
    BOOST_TEST(!(co_await force(lease_kind::read)));
    BOOST_TEST(!(co_await force(lease_kind::write)));
    BOOST_TEST((co_await st.async_status(name, asio::use_awaitable)).held);
    const dlock::lease_key e_key{name, "side-m", e.lease_ref, lease_kind::mutex};
    BOOST_TEST((co_await st.async_release(e_key, asio::use_awaitable)));
    BOOST_TEST((keys_of ? keys_of(name) : std::vector<std::string>{}).empty(), name << ": keys left behind");
}

inline asio::awaitable<void> check_contract(dlock::store& st, std::function<void()> stop, dlock::store* other = nullptr,
                                            keys_of_fn keys_of = {})
{
    const std::string name = "contract:" + std::to_string(::getpid());
    std::vector<dlock::watch_event> events;
    auto id = st.watch(name, [&](dlock::watch_event ev) { events.push_back(ev); });
    asio::steady_timer t(co_await asio::this_coro::executor);
    for (int i = 0; i < 500 && events.empty(); ++i) {
        t.expires_after(2ms);
        co_await t.async_wait(asio::use_awaitable);
    }
    BOOST_REQUIRE(!events.empty());
    BOOST_TEST((events.front() == dlock::watch_event::ready));

    // Per-session stores (etcd, ZooKeeper) grant what their session has left, at most the ask;
    // their holders' remaining lease may be unknown.
    const bool per_session = st.traits().live == dlock::liveness::per_session;
    // Free: taken, with a fencing token.
    auto a = co_await st.async_try_acquire(name, "owner-a", 5s, asio::use_awaitable);
    BOOST_TEST(a.acquired);
    BOOST_TEST(a.fencing_token > 0u);
    if (per_session)
        BOOST_TEST((a.granted_ttl.count() > 3000 && a.granted_ttl.count() <= 5000), a.granted_ttl.count());
    else
        BOOST_TEST(a.granted_ttl.count() == 5000);
    // The same token again (a retry after a lost reply): still ours, same fencing token.
    auto again = co_await st.async_try_acquire(name, "owner-a", 5s, asio::use_awaitable);
    BOOST_TEST(again.acquired);
    BOOST_TEST(again.fencing_token == a.fencing_token);
    // Another owner: refused, told how long the lease has left.
    auto b = co_await st.async_try_acquire(name, "owner-b", 5s, asio::use_awaitable);
    BOOST_TEST(!b.acquired);
    // A store with a coarse clock (memcached: whole seconds) may report up to one unit less.
    const auto unit = st.traits().ttl_granularity > 1ms ? st.traits().ttl_granularity.count() : 0;
    if (!per_session || b.holder_ttl.count() >= 0) {
        BOOST_TEST(b.holder_ttl.count() > (per_session ? 0 : 4000 - unit));
        BOOST_TEST(b.holder_ttl.count() <= 5000);
    }
    // Renewal: only by the owner, and it reports that someone else asked.
    auto r_other = co_await st.async_renew(name, "owner-b", 5s, asio::use_awaitable);
    BOOST_TEST(!r_other.owned);
    auto r_own = co_await st.async_renew(name, "owner-a", 5s, asio::use_awaitable);
    BOOST_TEST(r_own.owned);
    BOOST_TEST(r_own.contended);
    auto r_quiet = co_await st.async_renew(name, "owner-a", 5s, asio::use_awaitable);
    BOOST_TEST(!r_quiet.contended);
    // Status.
    auto s = co_await st.async_status(name, asio::use_awaitable);
    BOOST_TEST(s.held);
    BOOST_TEST(s.holder == "owner-a");
    BOOST_TEST(s.fencing_token == a.fencing_token);
    BOOST_TEST(s.last_fencing_token >= a.fencing_token);
    BOOST_TEST(!s.key.empty());
    // Release: never someone else's; our own once, then no longer ours.
    BOOST_TEST(!(co_await st.async_release(name, "owner-b", asio::use_awaitable)));
    BOOST_TEST((co_await st.async_release(name, "owner-a", asio::use_awaitable)));
    BOOST_TEST(!(co_await st.async_release(name, "owner-a", asio::use_awaitable)));
    for (int i = 0; i < 500 && events.size() < 2; ++i) {
        t.expires_after(2ms);
        co_await t.async_wait(asio::use_awaitable);
    }
    // A store without notifications (memcached) only ever says `ready`.
    if (st.traits().release_notifications) {
        BOOST_REQUIRE(events.size() >= 2u);
        BOOST_TEST((events[1] == dlock::watch_event::released));
    } else {
        BOOST_TEST(events.size() == 1u);
    }
    // A new lease: a larger fencing token.
    auto c = co_await st.async_try_acquire(name, "owner-b", 5s, asio::use_awaitable);
    BOOST_TEST(c.acquired);
    BOOST_TEST(c.fencing_token > a.fencing_token);
    // The operator's override frees it whoever holds it.
    BOOST_TEST((co_await st.async_force_release(name, asio::use_awaitable)));
    auto s2 = co_await st.async_status(name, asio::use_awaitable);
    BOOST_TEST(!s2.held);
    if (per_session) {  // a lease ends with its session: each store's own tests kill one
        co_await st.async_release(name, "owner-b", asio::use_awaitable);
        st.unwatch(id);
        co_await check_traits(st, name + ":traits");
        co_await check_unwatch(st, name + ":unwatch");
        if (st.traits().direct_handoff)
            co_await check_handoff(st, name + ":handoff");
        co_await check_kinds(st, other ? *other : st, keys_of, name + ":kinds");
        co_await check_force_sides(other ? *other : st, keys_of, name + ":sides");
        co_return stop();
    }
    // Expiry: a short lease ends by itself (the shortest the store takes; a store with a
    // coarse clock may keep it up to two of its units longer).
    const auto short_lease = std::max<std::chrono::milliseconds>(50ms, st.traits().min_ttl);
    auto d = co_await st.async_try_acquire(name, "owner-c", short_lease, asio::use_awaitable);
    BOOST_TEST(d.acquired);
    t.expires_after(short_lease + 70ms);
    co_await t.async_wait(asio::use_awaitable);
    auto e = co_await st.async_try_acquire(name, "owner-d", 5s, asio::use_awaitable);
    for (int i = 0; !e.acquired && unit > 0 && i < 2 * unit / 20 + 10; ++i) {
        t.expires_after(20ms);
        co_await t.async_wait(asio::use_awaitable);
        e = co_await st.async_try_acquire(name, "owner-d", 5s, asio::use_awaitable);
    }
    BOOST_TEST(e.acquired);
    BOOST_TEST(e.fencing_token > d.fencing_token);  // never reset by expiry
    co_await st.async_release(name, "owner-d", asio::use_awaitable);
    st.unwatch(id);
    co_await check_traits(st, name + ":traits");
    co_await check_unwatch(st, name + ":unwatch");
    if (st.traits().direct_handoff)
        co_await check_handoff(st, name + ":handoff");
    co_await check_kinds(st, other ? *other : st, keys_of, name + ":kinds");
    co_await check_force_sides(other ? *other : st, keys_of, name + ":sides");
    stop();
}

// Issue 29: a lock handed from one registry to another (through the store's own queue where
// it has one) and then held for several leases stays held: no loss, its release succeeds,
// and another registry takes the name at once after it. `second` may be `first` (a second
// registry on the same store) or another store on the same servers.
inline asio::awaitable<void> check_handoff_then_long_hold(dlock::store& first, dlock::store& second, std::string name)
{
    const auto lease = std::max<std::chrono::milliseconds>(2s, first.traits().min_ttl);
    dlock::registry ra(first, {.lease = lease}), rb(second, {.lease = lease});
    auto ex = co_await asio::this_coro::executor;
    auto ga = co_await ra.obtain(name).acquire(asio::use_awaitable);
    BOOST_REQUIRE(ga);
    bool b_done = false;
    boost::system::error_code b_ec;
    dlock::guard gb;
    asio::co_spawn(
        ex,
        [&]() -> asio::awaitable<void> {
            auto [ec, g] = co_await rb.obtain(name).acquire_for(20s, asio::as_tuple(asio::use_awaitable));
            b_ec = ec;
            gb = std::move(g);
            b_done = true;
        },
        asio::detached);
    // B asked the store and waits (queued there: its second, queued attempt was refused too).
    const bool direct = second.traits().direct_handoff;
    asio::steady_timer t(ex);
    for (int i = 0; i < 1000 && rb.stats().contended < (direct ? 2u : 1u); ++i) {
        t.expires_after(5ms);
        co_await t.async_wait(asio::use_awaitable);
    }
    BOOST_REQUIRE(rb.stats().contended >= 1u);
    BOOST_TEST(!b_done);
    auto [rel_a] = co_await ga.release(asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(!rel_a, rel_a.message());
    for (int i = 0; i < 2000 && !b_done; ++i) {
        t.expires_after(5ms);
        co_await t.async_wait(asio::use_awaitable);
    }
    BOOST_REQUIRE(b_done);
    BOOST_REQUIRE_MESSAGE(!b_ec && gb, "the waiter did not get the name: " << b_ec.message());
    // Three and a half leases, the loss bound to the wait: it must run to its end.
    t.expires_after(lease * 7 / 2);
    auto [waited] =
        co_await t.async_wait(asio::bind_cancellation_slot(gb.lost_slot(), asio::as_tuple(asio::use_awaitable)));
    BOOST_TEST(!waited, "the lease was lost " << lease.count() << " ms after a hand-off: " << waited.message());
    BOOST_TEST(!gb.is_lost());
    BOOST_TEST(rb.stats().lost == 0u);
    BOOST_TEST((gb.valid_until() > std::chrono::steady_clock::now()));
    auto [rel_b] = co_await gb.release(asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(!rel_b, rel_b.message());
    // Freed at the store: the other registry takes it with one attempt.
    auto [ec_c, gc] = co_await ra.obtain(name).try_acquire(asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(!ec_c, ec_c.message());
    BOOST_TEST(!!gc, "the name stayed held at the store after its holder released it");
    if (gc)
        co_await gc.release(asio::as_tuple(asio::use_awaitable));
    // The releases reach the store before the registries go.
    for (int i = 0; i < 1000 && ra.in_flight() + rb.in_flight() > 0; ++i) {
        t.expires_after(5ms);
        co_await t.async_wait(asio::use_awaitable);
    }
}

// `other`: a second client of the same server (none: `st` plays both, as the memory store
// must); `keys_of`: the server's keys of a name, to check that nothing is left behind.
inline void run_contract(asio::io_context& io, dlock::store& st, std::function<void()> stop,
                         dlock::store* other = nullptr, keys_of_fn keys_of = {})
{
    bool finished = false;
    asio::co_spawn(io, check_contract(st, std::move(stop), other, std::move(keys_of)), [&](std::exception_ptr e) {
        finished = true;
        if (e)
            std::rethrow_exception(e);
    });
    io.run_for(30s);
    BOOST_TEST(finished);
}


}  // namespace dlock::test
