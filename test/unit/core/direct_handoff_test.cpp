// SPDX-License-Identifier: BSL-1.0
// Direct hand-off in the driver, on a memory_store that hands the name to queued waiters:
// several registries on one store stand for several processes.
#include <dlock/error.hpp>
#include <dlock/memory_store.hpp>
#include <dlock/registry.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <functional>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using boost::system::error_code;

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
    // Lets other handlers run until `cond` holds (bounded by a number of passes).
    asio::awaitable<bool> until(std::function<bool()> cond)
    {
        for (int i = 0; i < 10'000 && !cond(); ++i)
            co_await asio::post(io, asio::use_awaitable);
        co_return cond();
    }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(direct_handoff_suite, fixture)

BOOST_AUTO_TEST_CASE(processes_get_the_name_in_queue_order_with_consecutive_tokens)
{
    dlock::registry a(store, {.lease = 5s}), b(store, {.lease = 5s}), c(store, {.lease = 5s});
    std::vector<std::pair<char, std::uint64_t>> order;
    int done = 0;
    auto waiter = [&](dlock::registry& reg, char tag) -> asio::awaitable<void> {
        auto g = co_await reg.obtain("n").acquire();
        order.emplace_back(tag, g.fencing_token());
        co_await g.release();
        ++done;
    };
    spawn([&]() -> asio::awaitable<void> {
        auto g = co_await a.obtain("n").acquire();
        order.emplace_back('a', g.fencing_token());
        spawn([&] { return waiter(b, 'b'); });
        BOOST_TEST(co_await until([&] { return store.queued("dlock:n") == 1; }));
        spawn([&] { return waiter(c, 'c'); });
        BOOST_TEST(co_await until([&] { return store.queued("dlock:n") == 2; }));
        auto st = co_await store.async_status("dlock:n", asio::use_awaitable);
        BOOST_TEST(st.queued == 2u);
        co_await g.release();
    });
    io.run_for(10s);
    BOOST_TEST(done == 2);
    BOOST_TEST_REQUIRE(order.size() == 3u);
    BOOST_TEST(order[1].first == 'b');
    BOOST_TEST(order[2].first == 'c');
    BOOST_TEST(order[1].second == order[0].second + 1);
    BOOST_TEST(order[2].second == order[1].second + 1);
    BOOST_TEST(b.stats().store_handoffs == 1u);
    BOOST_TEST(c.stats().store_handoffs == 1u);
    BOOST_TEST(b.stats().woken_by_timer + c.stats().woken_by_timer == 0u);
    BOOST_TEST(store.size() == 0u);
    BOOST_TEST(store.queued("dlock:n") == 0u);
}

// The withdrawal happens before the cancelled caller resumes: a caller that closes its
// store right after leaves no queue entry.
BOOST_AUTO_TEST_CASE(a_cancelled_waiter_has_left_the_queue_when_it_resumes)
{
    dlock::registry a(store, {.lease = 5s}), b(store, {.lease = 5s});
    std::size_t queued_at_resume = 99;
    bool aborted = false;
    spawn([&]() -> asio::awaitable<void> {
        auto g = co_await a.obtain("n").acquire();
        asio::cancellation_signal cancel;
        spawn([&]() -> asio::awaitable<void> {
            auto [ec, gb] = co_await b.obtain("n").acquire(
                asio::bind_cancellation_slot(cancel.slot(), asio::as_tuple(asio::use_awaitable)));
            aborted = ec == asio::error::operation_aborted;
            queued_at_resume = store.queued("dlock:n");
        });
        BOOST_TEST(co_await until([&] { return store.queued("dlock:n") == 1; }));
        cancel.emit(asio::cancellation_type::terminal);
        BOOST_TEST(co_await until([&] { return aborted; }));
        co_await g.release();
        BOOST_TEST(co_await until([&] { return a.size() == 0 && b.size() == 0; }));
    });
    io.run_for(10s);
    BOOST_TEST(aborted);
    BOOST_TEST(queued_at_resume == 0u);
    BOOST_TEST(store.size() == 0u);  // released to nobody: free
    BOOST_TEST(b.stats().store_handoffs == 0u);
}

// A queued token nobody listens for any more (its process died) is skipped.
BOOST_AUTO_TEST_CASE(a_dead_waiter_is_skipped)
{
    dlock::registry a(store, {.lease = 5s}), b(store, {.lease = 5s});
    std::uint64_t fence_a = 0, fence_b = 0;
    spawn([&]() -> asio::awaitable<void> {
        auto g = co_await a.obtain("n").acquire();
        fence_a = g.fencing_token();
        // A local, not a temporary inside co_await: g++ 12 destroys such a temporary twice.
        dlock::lease_request ghost{"dlock:n", "ghost", 5000ms, dlock::lease_kind::mutex, 1, true};
        auto r = co_await store.async_try_acquire(ghost, asio::use_awaitable);
        BOOST_TEST(!r.acquired);
        spawn([&]() -> asio::awaitable<void> {
            auto gb = co_await b.obtain("n").acquire();
            fence_b = gb.fencing_token();
            co_await gb.release();
        });
        BOOST_TEST(co_await until([&] { return store.queued("dlock:n") == 2; }));
        co_await g.release();
    });
    io.run_for(10s);
    BOOST_TEST(fence_b == fence_a + 1);
    BOOST_TEST(b.stats().store_handoffs == 1u);
    BOOST_TEST(store.size() == 0u);
    BOOST_TEST(store.queued("dlock:n") == 0u);
}

// After a long wait the hand-off's start is too loosely bounded: the waiter confirms it.
BOOST_AUTO_TEST_CASE(a_handoff_after_a_long_wait_is_confirmed)
{
    dlock::registry a(store, {.lease = 5s}), b(store, {.lease = 300ms});
    std::uint64_t fence_a = 0, fence_b = 0;
    std::chrono::steady_clock::duration left{};
    spawn([&]() -> asio::awaitable<void> {
        auto g = co_await a.obtain("n").acquire();
        fence_a = g.fencing_token();
        spawn([&]() -> asio::awaitable<void> {
            auto gb = co_await b.obtain("n").acquire();
            fence_b = gb.fencing_token();
            left = gb.valid_until() - std::chrono::steady_clock::now();
            co_await gb.release();
        });
        BOOST_TEST(co_await until([&] { return store.queued("dlock:n") == 1; }));
        asio::steady_timer t(io, 200ms);  // more than half of b's lease passes in the queue
        co_await t.async_wait(asio::use_awaitable);
        co_await g.release();
    });
    io.run_for(10s);
    BOOST_TEST(fence_b == fence_a + 1);
    BOOST_TEST(b.stats().store_handoffs == 0u);
    BOOST_TEST(left > 200ms);
}

// Local hand-offs, yields and direct hand-offs together: one holder at a time, exact count.
BOOST_AUTO_TEST_CASE(many_processes_many_coroutines_exclusive)
{
    constexpr int processes = 4, coroutines = 8, sections = 50;
    std::vector<std::unique_ptr<dlock::registry>> regs;
    for (int p = 0; p < processes; ++p)
        regs.push_back(std::make_unique<dlock::registry>(store, dlock::lock_config{.lease = 5s, .handoff_budget = 4}));
    int inside = 0, max_inside = 0, count = 0, finished = 0;
    std::uint64_t last_fence = 0;
    bool fences_ordered = true;
    for (auto& reg : regs)
        for (int c = 0; c < coroutines; ++c)
            spawn([&, r = reg.get()]() -> asio::awaitable<void> {
                auto lock = r->obtain("hot");
                for (int i = 0; i < sections; ++i) {
                    auto g = co_await lock.acquire();
                    fences_ordered = fences_ordered && g.fencing_token() >= last_fence;
                    last_fence = g.fencing_token();
                    max_inside = std::max(max_inside, ++inside);
                    int v = count;
                    co_await asio::post(io, asio::use_awaitable);  // a read-modify-write across a suspension
                    count = v + 1;
                    --inside;
                    co_await g.release();
                }
                ++finished;
            });
    io.run_for(30s);
    BOOST_TEST(finished == processes * coroutines);
    BOOST_TEST(count == processes * coroutines * sections);
    BOOST_TEST(max_inside == 1);
    BOOST_TEST(fences_ordered);
    std::uint64_t direct = 0;
    for (auto& reg : regs)
        direct += reg->stats().store_handoffs;
    BOOST_TEST(direct > 0u);
    BOOST_TEST(store.size() == 0u);
    BOOST_TEST(store.queued("dlock:hot") == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
