// SPDX-License-Identifier: BSL-1.0
// election::run on memory_store: a term stopped by a lost lease campaigns again with rejoin
// (a higher term), ends run() with lock_lost without it; a body that returns after its loss
// is never run again; the body's own exception ends run() and resigns; a rejoining
// candidate is stopped by cancellation while it campaigns, leaving nothing behind.
#include <dlock/election.hpp>
#include <dlock/error.hpp>
#include <dlock/memory_store.hpp>
#include <dlock/registry.hpp>

#include "unit/memory_fixture.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <functional>
#include <optional>
#include <stdexcept>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using boost::system::error_code;

namespace {

struct fixture : dlock::test::memory_fixture {
    dlock::registry reg{store, {.lease = 300ms}};
    dlock::election e{reg, "r"};
    std::vector<std::uint64_t> terms;
    std::optional<std::exception_ptr> ended;  // run()'s outcome once it ends (null: returned)

    void start(std::function<asio::awaitable<void>(dlock::leadership&)> body, dlock::election_run_options o,
               asio::cancellation_slot slot = {})
    {
        asio::co_spawn(io, e.run("v", std::move(body), o),
                       asio::bind_cancellation_slot(slot, [this](std::exception_ptr ex) { ended = ex; }));
    }
    // The outcome's error code: success if run() returned (or threw something else).
    error_code outcome() const
    {
        if (!ended || !*ended)
            return {};
        try {
            std::rethrow_exception(*ended);
        } catch (const boost::system::system_error& x) {
            return x.code();
        } catch (...) {
            return {};
        }
    }
    // A first term taken away at the store (noticed at the watchdog's next renewal) that
    // waits far longer than the lease, so only the loss ends it; later terms return.
    std::function<asio::awaitable<void>(dlock::leadership&)> lose_first_term()
    {
        return [this](dlock::leadership& l) -> asio::awaitable<void> {
            terms.push_back(l.term());
            if (terms.size() > 1)
                co_return;
            store.expire_now("dlock:r");
            asio::steady_timer long_wait(io, 60s);
            co_await long_wait.async_wait(asio::use_awaitable);
        };
    }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(election_run_suite, fixture)

BOOST_AUTO_TEST_CASE(a_lost_term_is_run_again_with_a_higher_term_when_rejoining)
{
    start(lose_first_term(), {.rejoin = true});
    io.run_for(10s);
    BOOST_REQUIRE(ended.has_value());
    BOOST_TEST(!outcome(), outcome().message());
    BOOST_REQUIRE(terms.size() == 2u);
    BOOST_TEST(terms[1] > terms[0]);
    BOOST_TEST(store.size() == 0u);  // the second term resigned
}

BOOST_AUTO_TEST_CASE(without_rejoin_a_lost_term_ends_run_with_lock_lost)
{
    start(lose_first_term(), {});
    io.run_for(10s);
    BOOST_TEST(outcome() == dlock::error::lock_lost);
    BOOST_TEST(terms.size() == 1u);
    BOOST_TEST(store.size() == 0u);
}

BOOST_AUTO_TEST_CASE(a_body_that_returns_after_its_loss_is_not_run_again)
{
    start(
        [this](dlock::leadership& l) -> asio::awaitable<void> {
            terms.push_back(l.term());
            store.expire_now("dlock:r");
            while (!l.is_lost())  // the watchdog's renewal finds it gone
                co_await asio::post(io, asio::use_awaitable);
        },
        {.rejoin = true});
    io.run_for(10s);
    BOOST_TEST(outcome() == dlock::error::lock_lost);
    BOOST_TEST(terms.size() == 1u);
}

BOOST_AUTO_TEST_CASE(the_bodys_own_exception_ends_run_and_resigns)
{
    start(
        [this](dlock::leadership& l) -> asio::awaitable<void> {
            terms.push_back(l.term());
            throw std::runtime_error("the leader's own failure");
            co_return;
        },
        {.rejoin = true});
    io.run_for(10s);
    BOOST_REQUIRE(ended.has_value());
    BOOST_REQUIRE(*ended);
    BOOST_CHECK_THROW(std::rethrow_exception(*ended), std::runtime_error);  // the body's, not a loss
    BOOST_TEST(terms.size() == 1u);
    BOOST_TEST(store.size() == 0u);
}

// The caller's cancellation during the body: the body runs on (only a loss stops it), the
// term ends with its resignation, and run() returns as the body did.
BOOST_AUTO_TEST_CASE(a_cancellation_during_the_body_still_resigns)
{
    asio::cancellation_signal stop;
    bool body_ended = false;
    start(
        [&](dlock::leadership& l) -> asio::awaitable<void> {
            terms.push_back(l.term());
            stop.emit(asio::cancellation_type::terminal);
            asio::steady_timer t(io, 50ms);
            co_await t.async_wait(asio::use_awaitable);
            body_ended = true;
        },
        {.rejoin = true}, stop.slot());
    io.run_for(10s);
    BOOST_TEST(body_ended);
    BOOST_REQUIRE(ended.has_value());
    BOOST_TEST(!*ended, outcome().message());  // returned: resign ran, nothing thrown
    BOOST_TEST(terms.size() == 1u);
    BOOST_TEST(store.size() == 0u);
}

BOOST_AUTO_TEST_CASE(a_rejoining_candidate_is_stopped_by_cancellation_while_it_campaigns)
{
    dlock::registry other(store, {.lease = 5s});
    dlock::election held_by_other(other, "r");
    asio::cancellation_signal stop;
    bool ran = false;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            auto l = co_await held_by_other.campaign("other", asio::use_awaitable);
            start(lose_first_term(), {.rejoin = true}, stop.slot());
            for (int i = 0; i < 10'000 && store.watch_count() == 0; ++i)
                co_await asio::post(io, asio::use_awaitable);
            BOOST_TEST(store.watch_count() == 1u);  // queued behind the other leader
            stop.emit(asio::cancellation_type::terminal);
            for (int i = 0; i < 10'000 && !ended; ++i)
                co_await asio::post(io, asio::use_awaitable);
            co_await l.resign(asio::use_awaitable);
            ran = true;
        },
        asio::detached);
    io.run_for(10s);
    BOOST_TEST(ran);
    BOOST_TEST(outcome() == asio::error::operation_aborted);
    BOOST_TEST(terms.empty());
    BOOST_TEST(store.watch_count() == 0u);
    BOOST_TEST(store.size() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
