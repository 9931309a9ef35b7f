// SPDX-License-Identifier: BSL-1.0
// Read-write locks and semaphores on a memory_store with direct hand-off (several registries
// on one store stand for several processes), and the lease-set protocol on its own.
#include <dlock/error.hpp>
#include <dlock/memory_store.hpp>
#include <dlock/registry.hpp>

#include "core/lease_set.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <functional>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using boost::system::error_code;
using dlock::lease_kind;
using dlock::lease_request;

namespace {

struct fixture {
    asio::io_context io;
    dlock::memory_store store{io.get_executor(), true};

    void spawn(std::function<asio::awaitable<void>()> f)
    {
        asio::co_spawn(io, std::move(f), [](std::exception_ptr e) {
            if (e)
                std::rethrow_exception(e);
        });
    }
    asio::awaitable<bool> until(std::function<bool()> cond)
    {
        for (int i = 0; i < 10'000 && !cond(); ++i)
            co_await asio::post(io, asio::use_awaitable);
        co_return cond();
    }
};

using clock_type = std::chrono::steady_clock;
const auto t0 = clock_type::time_point{} + 1h;
auto all_live = [](const std::string&) { return true; };

}  // namespace

BOOST_FIXTURE_TEST_SUITE(primitives_unit, fixture)

BOOST_AUTO_TEST_CASE(lease_set_is_first_come_first_served)
{
    dlock::detail::lease_set s(lease_kind::read, 0);
    std::uint64_t fence = 0;
    std::vector<std::string> granted;
    auto grant = [&](const std::string& t, const dlock::grant_notice&) { granted.push_back(t); };
    auto req = [](std::string t, lease_kind k, bool queue = true) {
        return lease_request{"n", std::move(t), 1000ms, k, 1, queue};
    };
    BOOST_TEST(s.acquire(req("r1", lease_kind::read), t0, fence, all_live, grant).acquired);
    BOOST_TEST(s.acquire(req("r2", lease_kind::read), t0, fence, all_live, grant).acquired);  // readers share
    auto w = s.acquire(req("w1", lease_kind::write), t0, fence, all_live, grant);
    BOOST_TEST(!w.acquired);
    BOOST_TEST(w.holder_ttl.count() == 1000);
    // A reader that comes after a queued writer waits behind it.
    BOOST_TEST(!s.acquire(req("r3", lease_kind::read), t0, fence, all_live, grant).acquired);
    BOOST_TEST(!s.acquire(req("r4", lease_kind::read), t0, fence, all_live, grant).acquired);
    BOOST_TEST(s.renew("r1", 1000ms, t0).contended);  // told someone waits
    bool wake = false;
    BOOST_TEST(s.release("r1", t0, fence, all_live, grant, wake));
    BOOST_TEST(granted.empty());  // r2 still reads
    BOOST_TEST(s.release("r2", t0, fence, all_live, grant, wake));
    BOOST_TEST((granted == std::vector<std::string>{"w1"}));
    BOOST_TEST(s.release("w1", t0, fence, all_live, grant, wake));
    // Readers queued together are let in together.
    BOOST_TEST((granted == std::vector<std::string>{"w1", "r3", "r4"}));
    BOOST_TEST(wake);  // nobody left queued: the others retry
    auto st = s.status(t0);
    BOOST_TEST(st.holders == 2u);
    BOOST_TEST(!st.writer);
    BOOST_TEST(fence == 5u);  // one token per lease, strictly increasing
}

BOOST_AUTO_TEST_CASE(lease_set_skips_dead_waiters_and_expires_holders)
{
    dlock::detail::lease_set s(lease_kind::permit, 2);
    std::uint64_t fence = 0;
    std::vector<std::string> granted;
    auto grant = [&](const std::string& t, const dlock::grant_notice&) { granted.push_back(t); };
    auto live = [](const std::string& t) { return t != "dead"; };
    auto req = [](std::string t) { return lease_request{"n", std::move(t), 1000ms, lease_kind::permit, 2, true}; };
    BOOST_TEST(s.acquire(req("a"), t0, fence, live, grant).acquired);
    BOOST_TEST(s.acquire(req("b"), t0, fence, live, grant).acquired);
    BOOST_TEST(!s.acquire(req("dead"), t0, fence, live, grant).acquired);
    BOOST_TEST(!s.acquire(req("c"), t0, fence, live, grant).acquired);
    BOOST_TEST(s.queued() == 1u);  // serving the queue dropped the dead waiter
    bool wake = false;
    BOOST_TEST(s.release("a", t0, fence, live, grant, wake));
    BOOST_TEST((granted == std::vector<std::string>{"c"}));
    // b's lease runs out: its permit is free for the next comer without any release.
    BOOST_TEST(s.acquire(req("d"), t0 + 1001ms, fence, live, grant).acquired);
    BOOST_TEST(!s.renew("b", 1000ms, t0 + 1001ms).owned);
    auto other = lease_request{"n", "e", 1000ms, lease_kind::permit, 3, false};
    BOOST_TEST(s.check(other) == dlock::error::kind_mismatch);
    BOOST_TEST(s.check(lease_request{"n", "e", 1000ms, lease_kind::read, 1, false}) == dlock::error::kind_mismatch);
}

BOOST_AUTO_TEST_CASE(lease_set_forced_release_of_one_side)
{
    dlock::detail::lease_set s(lease_kind::read, 0);
    std::uint64_t fence = 0;
    std::vector<std::string> granted;
    auto grant = [&](const std::string& t, const dlock::grant_notice&) { granted.push_back(t); };
    auto req = [](std::string t, lease_kind k) { return lease_request{"n", std::move(t), 1000ms, k, 1, true}; };
    BOOST_TEST(s.acquire(req("r1", lease_kind::read), t0, fence, all_live, grant).acquired);
    BOOST_TEST(s.acquire(req("r2", lease_kind::read), t0, fence, all_live, grant).acquired);
    BOOST_TEST(!s.acquire(req("w1", lease_kind::write), t0, fence, all_live, grant).acquired);  // queued
    BOOST_TEST(!s.acquire(req("r3", lease_kind::read), t0, fence, all_live, grant).acquired);   // behind it
    BOOST_TEST(!s.force_release(lease_kind::write, t0, fence, all_live, grant));                // no writer holds
    BOOST_TEST(s.status(t0).holders == 2u);
    // Every reader goes at once; the queued writer gets in, the reader behind it still waits.
    BOOST_TEST(s.force_release(lease_kind::read, t0, fence, all_live, grant));
    BOOST_TEST((granted == std::vector<std::string>{"w1"}));
    BOOST_TEST(!s.renew("r1", 1000ms, t0).owned);
    BOOST_TEST(!s.force_release(lease_kind::read, t0, fence, all_live, grant));  // the writer is no reader
    BOOST_TEST(s.status(t0).writer);
    BOOST_TEST(s.force_release(lease_kind::write, t0, fence, all_live, grant));
    BOOST_TEST((granted == std::vector<std::string>{"w1", "r3"}));
    // Any other kind: every lease.
    BOOST_TEST(s.force_release(lease_kind::mutex, t0, fence, all_live, grant));
    BOOST_TEST(!s.status(t0).held);
}

BOOST_AUTO_TEST_CASE(a_lock_forces_its_own_side_only)
{
    dlock::registry readers(store, {.lease = 5s}), writers(store, {.lease = 5s});
    auto rw = readers.obtain_rw("n");
    auto other = writers.obtain_rw("n");
    bool done = false;
    spawn([&]() -> asio::awaitable<void> {
        auto g = co_await rw.read().acquire();
        BOOST_TEST(!(co_await other.write().try_acquire()).owns_lock());
        BOOST_TEST(!(co_await other.write().force_release()));  // no writer holds
        BOOST_TEST((co_await rw.read().force_release()));       // from any handle, any process
        // The lease freed was this registry's: nobody joins it any more, and its holder learns
        // of the loss from a renewal sent at once.
        auto late = co_await rw.read().try_acquire();
        BOOST_TEST(!late.owns_lock());
        BOOST_TEST((co_await until([&] { return g.is_lost(); })));
        auto w = co_await other.write().try_acquire();
        BOOST_TEST(w.owns_lock());
        BOOST_TEST((co_await rw.write().force_release()));
        BOOST_TEST(!(co_await store.async_status("dlock:n")).held);
        auto mx = readers.obtain("m");
        auto h = co_await mx.acquire();
        BOOST_TEST((co_await mx.force_release()));
        dlock::lock empty;
        auto [ec, held] = co_await empty.force_release(asio::as_tuple(asio::use_awaitable));
        BOOST_TEST(ec == dlock::error::invalid_handle);
        BOOST_TEST(!held);
        done = true;
    });
    io.run_for(5s);
    BOOST_TEST(done);
}

BOOST_AUTO_TEST_CASE(local_readers_share_one_store_lease)
{
    dlock::registry reg(store, {.lease = 5s});
    auto rw = reg.obtain_rw("n");
    std::vector<dlock::guard> gs;
    spawn([&]() -> asio::awaitable<void> {
        for (int i = 0; i < 8; ++i)
            gs.push_back(co_await rw.read().acquire());
        auto st = co_await store.async_status("dlock:n");
        BOOST_TEST(st.holders == 1u);  // one store lease for all eight
        BOOST_TEST(gs.front().fencing_token() == gs.back().fencing_token());
        for (auto& g : gs)
            co_await g.release();
        // The lease stays for one more turn (for a reader coming right back), then goes.
        bool freed = false;
        for (int i = 0; i < 1000 && !freed; ++i)
            freed = !(co_await store.async_status("dlock:n")).held;
        BOOST_TEST(freed);
    });
    io.run_for(5s);
    BOOST_TEST(gs.size() == 8u);
    BOOST_TEST(reg.stats().handed_off >= 7u);  // joined without a round trip
}

BOOST_AUTO_TEST_CASE(a_writer_of_another_process_stops_new_local_readers)
{
    dlock::registry a(store, {.lease = 5s, .handoff_budget = 4}), b(store, {.lease = 5s});
    auto rw = a.obtain_rw("n");
    std::vector<dlock::guard> readers;
    bool writer_in = false;
    std::size_t readers_when_writer_in = 0, readers_refused = 0;
    int late_readers = 0;
    spawn([&]() -> asio::awaitable<void> {
        readers.push_back(co_await rw.read().acquire());
        // b's writer queues at the store behind the read lease.
        b.obtain_rw("n").write().acquire([&](error_code ec, dlock::guard g) {
            BOOST_TEST(!ec);
            writer_in = true;
            readers_when_writer_in = readers.size();
            g = {};
        });
        co_await until([&] { return store.queued("dlock:n") == 1; });
        // New local readers join until the budget's check learns that a writer waits ...
        for (int i = 0; i < 8; ++i) {
            auto g = co_await rw.read().try_acquire();
            if (g)
                readers.push_back(std::move(g));
            else
                ++readers_refused;
        }
        BOOST_TEST(readers_refused > 0u);
        BOOST_TEST(!writer_in);
        // ... and wait behind it; the writer gets in once the readers already in leave.
        for (int i = 0; i < 2; ++i)
            rw.read().acquire([&](error_code ec, dlock::guard) {
                BOOST_TEST(!ec);
                BOOST_TEST(writer_in);
                ++late_readers;
            });
        for (auto& g : readers)
            co_await g.release();
        readers.clear();
        co_await until([&] { return late_readers == 2; });
    });
    io.run_for(5s);
    BOOST_TEST(writer_in);
    BOOST_TEST(late_readers == 2);
}

BOOST_AUTO_TEST_CASE(a_semaphore_lends_at_most_its_permits)
{
    dlock::registry a(store, {.lease = 5s}), b(store, {.lease = 5s});
    auto sa = a.obtain_semaphore("s", 3);
    auto sb = b.obtain_semaphore("s", 3);
    int inside = 0, most = 0, done = 0;
    auto worker = [&](dlock::semaphore& s) -> asio::awaitable<void> {
        for (int i = 0; i < 10; ++i) {
            auto g = co_await s.acquire();
            most = std::max(most, ++inside);
            co_await asio::post(io, asio::use_awaitable);
            co_await asio::post(io, asio::use_awaitable);
            --inside;
            co_await g.release();
        }
        ++done;
    };
    for (int i = 0; i < 5; ++i) {
        spawn([&] { return worker(sa); });
        spawn([&] { return worker(sb); });
    }
    io.run_for(10s);
    BOOST_TEST(done == 10);
    BOOST_TEST(most == 3);
    BOOST_TEST(store.size() == 0u);
}

// available(): the permits minus every process's holders, read from the store; another
// primitive's name, or another size, is kind_mismatch.
BOOST_AUTO_TEST_CASE(a_semaphore_counts_its_free_permits_across_processes)
{
    dlock::registry a(store, {.lease = 5s}), b(store, {.lease = 5s});
    std::vector<unsigned> seen;
    error_code other_size, a_mutex, zero, empty;
    bool ran = false;
    spawn([&]() -> asio::awaitable<void> {
        auto sa = a.obtain_semaphore("free", 3);
        auto sb = b.obtain_semaphore("free", 3);
        seen.push_back(co_await sb.available());  // nobody holds: all 3
        auto g1 = co_await sa.acquire();
        seen.push_back(co_await sb.available());
        auto g2 = co_await sb.acquire();
        seen.push_back(co_await sa.available());
        auto g3 = co_await sa.acquire();
        seen.push_back(co_await sb.available());
        co_await g2.release();
        seen.push_back(co_await sa.available());
        co_await b.obtain_semaphore("free", 4).available(asio::redirect_error(asio::use_awaitable, other_size));
        auto m = co_await a.obtain("held-as-mutex").acquire();
        co_await b.obtain_semaphore("held-as-mutex", 2).available(asio::redirect_error(asio::use_awaitable, a_mutex));
        co_await a.obtain_semaphore("z", 0).available(asio::redirect_error(asio::use_awaitable, zero));
        co_await dlock::semaphore().available(asio::redirect_error(asio::use_awaitable, empty));
        co_await m.release();
        co_await g1.release();
        co_await g3.release();
        seen.push_back(co_await sb.available());
        ran = true;
    });
    io.run_for(5s);
    BOOST_TEST(ran);
    BOOST_TEST(seen == (std::vector<unsigned>{3, 2, 1, 0, 1, 3}), boost::test_tools::per_element());
    BOOST_TEST(other_size == dlock::error::kind_mismatch);
    BOOST_TEST(a_mutex == dlock::error::kind_mismatch);
    BOOST_TEST(zero == dlock::error::invalid_option);
    BOOST_TEST(empty == dlock::error::invalid_handle);
}

BOOST_AUTO_TEST_CASE(semaphore_bad_input)
{
    dlock::registry a(store, {.lease = 5s}), b(store, {.lease = 5s});
    error_code zero, mismatch, as_mutex, empty;
    spawn([&]() -> asio::awaitable<void> {
        co_await a.obtain_semaphore("z", 0).acquire(asio::redirect_error(asio::use_awaitable, zero));
        auto g = co_await a.obtain_semaphore("n", 2).acquire();
        co_await b.obtain_semaphore("n", 1).acquire(asio::redirect_error(asio::use_awaitable, mismatch));
        co_await b.obtain("n").try_acquire(asio::redirect_error(asio::use_awaitable, as_mutex));
        co_await dlock::semaphore().acquire(asio::redirect_error(asio::use_awaitable, empty));
        co_await g.release();
    });
    io.run_for(5s);
    BOOST_TEST(zero == dlock::error::invalid_option);
    BOOST_TEST(mismatch == dlock::error::kind_mismatch);
    BOOST_TEST(as_mutex == dlock::error::kind_mismatch);
    BOOST_TEST(empty == dlock::error::invalid_handle);
}

BOOST_AUTO_TEST_SUITE_END()
