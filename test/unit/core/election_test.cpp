// SPDX-License-Identifier: BSL-1.0
// Leader election on memory_store: terms are the mutex's fencing tokens, proclaim is fenced
// by the lease, observers see every change including "no leader", nothing is left behind.
#include <dlock/election.hpp>
#include <dlock/error.hpp>
#include <dlock/memory_store.hpp>
#include <dlock/registry.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <functional>
#include <optional>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using boost::system::error_code;

namespace {

struct fixture {
    asio::io_context io;
    dlock::memory_store store{io.get_executor()};

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

constexpr auto tuple = asio::as_tuple(asio::use_awaitable);

}  // namespace

BOOST_FIXTURE_TEST_SUITE(election_suite, fixture)

BOOST_AUTO_TEST_CASE(the_leader_is_the_mutex_holder_and_observers_see_every_change)
{
    dlock::registry a(store, {.lease = 5s}), b(store, {.lease = 5s}), watcher(store);
    std::vector<dlock::leader_info> seen;
    bool ran = false;
    dlock::election ea(a, "svc"), eb(b, "svc"), ew(watcher, "svc");
    auto obs = ew.observe();
    spawn([&]() -> asio::awaitable<void> {
        for (;;) {
            auto [ec, info] = co_await obs.async_next(tuple);
            if (ec)
                co_return;
            seen.push_back(info);
        }
    });
    spawn([&]() -> asio::awaitable<void> {
        BOOST_TEST(co_await until([&] { return seen.size() == 1; }));
        BOOST_TEST(!seen[0].present);  // nobody leads yet
        auto la = co_await ea.campaign("a:1", asio::use_awaitable);
        BOOST_TEST(la.is_leader());
        BOOST_TEST(la.value() == "a:1");
        auto st = co_await store.async_status("dlock:svc", asio::use_awaitable);
        BOOST_TEST(la.term() == st.fencing_token);  // the term is the mutex's fencing token
        BOOST_TEST(co_await until([&] { return seen.size() == 2; }));
        BOOST_TEST((seen[1] == dlock::leader_info{true, "a:1", la.term()}));
        auto one = co_await eb.leader(asio::use_awaitable);
        BOOST_TEST((one == seen[1]));
        // B campaigns meanwhile: it waits.
        std::optional<dlock::leadership> lb;
        spawn([&]() -> asio::awaitable<void> { lb = co_await eb.campaign("b:1", asio::use_awaitable); });
        co_await la.proclaim("a:2", asio::use_awaitable);
        BOOST_TEST(la.value() == "a:2");
        BOOST_TEST(co_await until([&] { return seen.size() == 3; }));
        BOOST_TEST(seen[2].value == "a:2");
        BOOST_TEST(!lb.has_value());
        auto term_a = la.term();
        co_await la.resign(asio::use_awaitable);
        BOOST_TEST(!la.is_leader());
        BOOST_TEST(co_await until([&] { return lb.has_value(); }));
        BOOST_TEST(lb->term() > term_a);
        BOOST_TEST(co_await until([&] { return !seen.empty() && seen.back().value == "b:1"; }));
        // Between A and B the name was free (or held but unproclaimed): "no leader".
        BOOST_REQUIRE(seen.size() >= 5u);
        BOOST_TEST(!seen[3].present);
        BOOST_TEST((seen[4] == dlock::leader_info{true, "b:1", lb->term()}));
        co_await lb->resign(asio::use_awaitable);
        BOOST_TEST(co_await until([&] { return !seen.back().present; }));
        obs = {};  // stops the observer: its pending async_next ends with operation_aborted
        BOOST_TEST(co_await until([&] { return store.watch_count() == 0; }));
        ran = true;
    });
    io.run_for(10s);
    BOOST_TEST(ran);
}

BOOST_AUTO_TEST_CASE(proclaim_is_refused_once_the_lease_is_gone_and_expiry_reads_as_no_leader)
{
    dlock::registry reg(store, {.lease = 300ms, .watchdog = false});
    bool ran = false;
    spawn([&]() -> asio::awaitable<void> {
        dlock::election e(reg, "x");
        auto obs = e.observe();
        auto first = co_await obs.async_next(asio::use_awaitable);
        BOOST_TEST(!first.present);
        auto l = co_await e.campaign("v1", asio::use_awaitable);
        auto led = co_await obs.async_next(asio::use_awaitable);
        BOOST_TEST(led.present);
        // The lease ends (no watchdog): nobody announces it, the observer reads it at its end.
        auto gone = co_await obs.async_next(asio::use_awaitable);
        BOOST_TEST(!gone.present);
        BOOST_TEST(!l.is_leader());  // never leader after valid_until()
        BOOST_TEST((std::chrono::steady_clock::now() >= l.valid_until()));
        auto [ec] = co_await l.proclaim("v2", tuple);
        BOOST_TEST(ec == dlock::error::lock_lost);
        BOOST_TEST(l.value() == "v1");
        auto none = co_await e.leader(asio::use_awaitable);
        BOOST_TEST(!none.present);
        ran = true;
    });
    io.run_for(10s);
    BOOST_TEST(ran);
}

BOOST_AUTO_TEST_CASE(a_proclaim_refused_by_the_store_is_lock_lost)
{
    dlock::registry reg(store, {.lease = 5s});
    bool ran = false;
    spawn([&]() -> asio::awaitable<void> {
        dlock::election e(reg, "y");
        auto l = co_await e.campaign("v1", asio::use_awaitable);
        store.expire_now("dlock:y");  // taken away at the store, not yet noticed locally
        auto [ec] = co_await l.proclaim("v2", tuple);
        BOOST_TEST(ec == dlock::error::lock_lost);
        auto info = co_await e.leader(asio::use_awaitable);
        BOOST_TEST(!info.present);
        dlock::leadership empty;
        auto [ec2] = co_await empty.proclaim("z", tuple);
        BOOST_TEST(ec2 == dlock::error::not_held);
        ran = true;
    });
    io.run_for(10s);
    BOOST_TEST(ran);
}

BOOST_AUTO_TEST_CASE(a_cancelled_campaign_leaves_no_lease_and_no_watch)
{
    dlock::registry a(store, {.lease = 5s}), b(store, {.lease = 5s});
    bool ran = false;
    spawn([&]() -> asio::awaitable<void> {
        dlock::election ea(a, "c"), eb(b, "c");
        auto la = co_await ea.campaign("a", asio::use_awaitable);
        for (auto type :
             {asio::cancellation_type::terminal, asio::cancellation_type::partial, asio::cancellation_type::total}) {
            asio::cancellation_signal sig;
            std::optional<error_code> result;
            eb.campaign(
                "b", asio::bind_cancellation_slot(sig.slot(), [&](error_code ec, dlock::leadership) { result = ec; }));
            BOOST_TEST(co_await until([&] { return store.watch_count() == 1; }));
            sig.emit(type);
            BOOST_TEST(co_await until([&] { return result.has_value(); }));
            BOOST_TEST((result && *result == asio::error::operation_aborted));
            BOOST_TEST(co_await until([&] { return store.watch_count() == 0; }));
        }
        co_await la.resign(asio::use_awaitable);
        BOOST_TEST(co_await until([&] { return a.in_flight() == 0 && b.in_flight() == 0; }));
        BOOST_TEST(store.size() == 0u);
        ran = true;
    });
    io.run_for(10s);
    BOOST_TEST(ran);
}

BOOST_AUTO_TEST_SUITE_END()
