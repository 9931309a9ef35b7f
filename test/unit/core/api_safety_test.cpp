// SPDX-License-Identifier: BSL-1.0
// The Asio rules a caller relies on: an operation acts on the state it was made from, even
// when started after its object was moved; a handler bound to another io_context keeps that
// context's run() going while it waits; every I/O object names its executor.
#include <dlock/election.hpp>
#include <dlock/error.hpp>
#include <dlock/latch.hpp>
#include <dlock/memory_store.hpp>
#include <dlock/registry.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <functional>
#include <optional>
#include <thread>
#include <type_traits>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using boost::system::error_code;

namespace {

struct fixture {
    asio::io_context io;
    dlock::memory_store store{io.get_executor()};
    dlock::registry reg{store, {.lease = 5s}};

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
    // Runs the coroutines to their end (bounded: a hang fails, it does not block the suite).
    void run() { io.run_for(10s); }
    dlock::guard take(const char* name)
    {
        dlock::guard g;
        spawn([&]() -> asio::awaitable<void> { g = co_await reg.obtain(name).acquire(asio::use_awaitable); });
        io.restart();
        run();
        io.restart();
        return g;
    }
};

constexpr auto tuple = asio::as_tuple(asio::use_awaitable);

}  // namespace

BOOST_FIXTURE_TEST_SUITE(api_safety, fixture)

// ---- operations made before a move act on what they were made from ----

BOOST_AUTO_TEST_CASE(a_deferred_release_started_after_the_guard_moved_releases_its_hold)
{
    bool ran = false;
    spawn([&]() -> asio::awaitable<void> {
        auto g = co_await reg.obtain("n").acquire(asio::use_awaitable);
        auto op = g.release(asio::deferred);
        dlock::guard g2 = std::move(g);
        auto [ec] = co_await std::move(op)(tuple);
        BOOST_TEST(!ec, ec.message());  // not not_held: the op released the hold it was made from
        BOOST_TEST(!g2.owns_lock());
        auto g3 = co_await reg.obtain("n").try_acquire(asio::use_awaitable);
        BOOST_TEST(g3.owns_lock());  // the name is free again
        ran = true;
    });
    run();
    BOOST_TEST(ran);
}

BOOST_AUTO_TEST_CASE(a_deferred_release_never_started_still_frees_the_name)
{
    bool ran = false;
    spawn([&]() -> asio::awaitable<void> {
        {
            auto g = co_await reg.obtain("n").acquire(asio::use_awaitable);
            auto op = g.release(asio::deferred);
            BOOST_TEST(!g.owns_lock());  // the operation took the hold
        }                                // dropped unstarted: released in the background, as a guard's destructor does
        auto [ec, g3] = co_await reg.obtain("n").acquire_for(5s, tuple);
        BOOST_TEST(!ec, ec.message());
        BOOST_TEST(g3.owns_lock());
        ran = true;
    });
    run();
    BOOST_TEST(ran);
}

BOOST_AUTO_TEST_CASE(a_deferred_wait_lost_started_after_the_guard_moved_waits_on_its_hold)
{
    bool ran = false;
    spawn([&]() -> asio::awaitable<void> {
        auto g = co_await reg.obtain("n").acquire(asio::use_awaitable);
        auto op = g.wait_lost(asio::deferred);
        dlock::guard g2 = std::move(g);
        std::optional<error_code> got;
        std::move(op)([&](error_code ec) { got = ec; });
        co_await until([&] { return got.has_value(); });  // nothing to see: it waits
        BOOST_TEST(!got.has_value(), (got ? got->message() : ""));
        co_await g2.release(asio::use_awaitable);
        BOOST_TEST(co_await until([&] { return got.has_value(); }));
        BOOST_TEST((got && *got == asio::error::operation_aborted));  // released first
        ran = true;
    });
    run();
    BOOST_TEST(ran);
}

BOOST_AUTO_TEST_CASE(a_deferred_proclaim_started_after_the_leadership_moved_writes_the_value)
{
    bool ran = false;
    dlock::election e(reg, "svc");
    spawn([&]() -> asio::awaitable<void> {
        auto l = co_await e.campaign("v1", asio::use_awaitable);
        auto op = l.proclaim("v2", asio::deferred);
        dlock::leadership l2 = std::move(l);
        auto [ec] = co_await std::move(op)(tuple);
        BOOST_TEST(!ec, ec.message());  // not not_held
        BOOST_TEST(l2.value() == "v2");
        auto info = co_await e.leader(asio::use_awaitable);
        BOOST_TEST(info.value == "v2");
        co_await l2.resign(asio::use_awaitable);
        ran = true;
    });
    run();
    BOOST_TEST(ran);
}

BOOST_AUTO_TEST_CASE(a_deferred_async_next_started_after_the_observer_moved_reads_its_stream)
{
    bool ran = false;
    dlock::election e(reg, "svc");
    spawn([&]() -> asio::awaitable<void> {
        auto obs = e.observe();
        auto op = obs.async_next(asio::deferred);
        dlock::leader_observer o2 = std::move(obs);
        auto [ec, info] = co_await std::move(op)(tuple);
        BOOST_TEST(!ec, ec.message());  // not invalid_handle
        BOOST_TEST(!info.present);
        ran = true;
    });
    run();
    BOOST_TEST(ran);
}

BOOST_AUTO_TEST_CASE(a_deferred_async_next_started_after_the_observer_is_gone_is_aborted)
{
    bool ran = false;
    dlock::election e(reg, "svc");
    spawn([&]() -> asio::awaitable<void> {
        auto op = [&] {
            auto obs = e.observe();
            return obs.async_next(asio::deferred);
        }();
        auto [ec, info] = co_await std::move(op)(tuple);  // completes: does not wait forever
        BOOST_TEST((ec == asio::error::operation_aborted), ec.message());
        ran = true;
    });
    run();
    BOOST_TEST(ran);
}

BOOST_AUTO_TEST_CASE(a_deferred_drain_started_after_the_registry_is_gone_completes)
{
    std::optional<error_code> got;
    {
        auto r = std::make_unique<dlock::registry>(store);
        auto op = r->async_drain(asio::deferred);
        r.reset();
        std::move(op)([&](error_code ec) { got = ec; });
    }
    run();
    BOOST_TEST((got && !*got));
}

BOOST_AUTO_TEST_CASE(a_run_started_after_the_lock_moved_runs_on_its_name)
{
    bool ran = false, body = false;
    spawn([&]() -> asio::awaitable<void> {
        auto lk = reg.obtain("n");
        auto sem = reg.obtain_semaphore("s", 1);
        auto a = lk.run([&](dlock::guard& g) -> asio::awaitable<void> {
            body = g.owns_lock() && g.name() == "n";
            co_return;
        });
        auto b = sem.run([&](dlock::guard& g) -> asio::awaitable<void> {
            body = body && g.owns_lock() && g.name() == "s";
            co_return;
        });
        auto lk2 = std::move(lk);  // the awaitables were made from the moved-from handles
        auto sem2 = std::move(sem);
        co_await std::move(a);  // not invalid_handle
        co_await std::move(b);
        ran = true;
    });
    run();
    BOOST_TEST(ran);
    BOOST_TEST(body);
}

// ---- a handler on another io_context keeps it running while it waits ----

BOOST_AUTO_TEST_CASE(an_acquire_bound_to_another_context_keeps_its_run_going_until_it_completes)
{
    auto g1 = take("n");
    BOOST_REQUIRE(g1.owns_lock());
    asio::io_context other;
    std::optional<error_code> got;
    dlock::guard g2;
    reg.obtain("n").acquire(asio::bind_executor(other, [&](error_code ec, dlock::guard g) {
        got = ec;
        g2 = std::move(g);  // released on this thread below: the registry is single-threaded
    }));
    io.poll();  // the acquire waits behind g1
    other.poll();
    BOOST_TEST(!other.stopped());         // work is outstanding: its run() would not return
    std::thread t([&] { other.run(); });  // returns once the handler has run
    g1.release([](error_code) {});
    run();
    t.join();
    BOOST_TEST((got && !*got));
    BOOST_TEST(g2.owns_lock());
}

BOOST_AUTO_TEST_CASE(other_waits_bound_to_another_context_keep_it_running)
{
    asio::io_context other;
    int done = 0;
    auto on_other = [&](auto f) { return asio::bind_executor(other, std::move(f)); };
    auto g1 = take("n");
    g1.wait_lost(on_other([&](error_code) { ++done; }));
    auto sem = reg.obtain_semaphore("s", 1);
    auto p1 = std::make_shared<dlock::guard>();
    sem.acquire([p1](error_code, dlock::guard g) { *p1 = std::move(g); });
    io.poll();
    sem.acquire(on_other([&](error_code, dlock::guard) { ++done; }));
    dlock::latch l(reg, "l", 1);
    l.wait(on_other([&](error_code) { ++done; }));
    dlock::election e(reg, "e");
    auto obs = e.observe();
    io.poll();  // the observer's first state is queued: take it, then wait for the next
    obs.async_next([](error_code, dlock::leader_info) {});
    io.poll();
    obs.async_next(on_other([&](error_code, dlock::leader_info) { ++done; }));
    io.poll();
    other.poll();
    BOOST_TEST(done == 0);
    BOOST_TEST(!other.stopped());  // four waits keep it running
    // Ending each wait lets it finish: run() returns once all four handlers have run.
    g1.release([](error_code) {});
    p1->release([](error_code) {});
    l.count_down([](error_code, std::uint64_t) {});
    obs = dlock::leader_observer();
    io.restart();
    run();
    other.run();
    BOOST_TEST(done == 4);
}

// ---- every I/O object names its executor: the registry's ----

BOOST_AUTO_TEST_CASE(every_io_object_gives_the_registrys_executor)
{
    asio::any_io_executor ex = io.get_executor();
    BOOST_TEST((reg.get_executor() == ex));
    BOOST_TEST((reg.obtain("n").get_executor() == ex));
    BOOST_TEST((reg.obtain_rw("rw").get_executor() == ex));
    BOOST_TEST((reg.obtain_semaphore("s", 2).get_executor() == ex));
    BOOST_TEST((dlock::latch(reg, "l", 2).get_executor() == ex));
    dlock::election e(reg, "e");
    BOOST_TEST((e.get_executor() == ex));
    auto obs = e.observe();
    BOOST_TEST((obs.get_executor() == ex));
    auto g = take("n");
    BOOST_TEST((g.get_executor() == ex));
    dlock::leadership l;
    spawn([&]() -> asio::awaitable<void> { l = co_await e.campaign("v", asio::use_awaitable); });
    run();
    BOOST_TEST((l.get_executor() == ex));
    static_assert(std::is_same_v<dlock::lock::executor_type, asio::any_io_executor>);
    // Empty handles have no registry, so no executor.
    BOOST_TEST(!dlock::lock().get_executor());
    BOOST_TEST(!dlock::guard().get_executor());
    BOOST_TEST(!dlock::semaphore().get_executor());
    BOOST_TEST(!dlock::rw_lock().get_executor());
    BOOST_TEST(!dlock::latch().get_executor());
    BOOST_TEST(!dlock::election().get_executor());
    BOOST_TEST(!dlock::leadership().get_executor());
    BOOST_TEST(!dlock::leader_observer().get_executor());
}

BOOST_AUTO_TEST_SUITE_END()
