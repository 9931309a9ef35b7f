// SPDX-License-Identifier: BSL-1.0
// The count-down latch on memory_store: members count once, counts must agree, waits wake
// on the last count-down without polling, cancelled waits leave no watch behind.
#include <dlock/error.hpp>
#include <dlock/latch.hpp>
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
#include <optional>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using boost::system::error_code;

namespace {

struct fixture {
    asio::io_context io;
    dlock::memory_store store{io.get_executor()};
    dlock::registry reg{store};

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

auto tuple = asio::as_tuple(asio::use_awaitable);

}  // namespace

BOOST_FIXTURE_TEST_SUITE(latch_suite, fixture)

BOOST_AUTO_TEST_CASE(a_member_counts_once_however_often_it_counts_down)
{
    bool ran = false;
    spawn([&]() -> asio::awaitable<void> {
        dlock::latch l(reg, "batch", 3);
        BOOST_TEST(co_await l.count(asio::use_awaitable) == 3u);  // no latch yet: the full count
        BOOST_TEST(co_await l.count_down("a", asio::use_awaitable) == 2u);
        BOOST_TEST(co_await l.count_down("a", asio::use_awaitable) == 2u);
        // Another handle (another process) with the same member: still once.
        dlock::latch other(reg, "batch", 3);
        BOOST_TEST(co_await other.count_down("a", asio::use_awaitable) == 2u);
        BOOST_TEST(co_await l.count_down(asio::use_awaitable) == 1u);  // library member
        BOOST_TEST(co_await l.count_down(asio::use_awaitable) == 0u);  // a new one per call
        BOOST_TEST(co_await l.count_down(asio::use_awaitable) == 0u);  // done stays done
        BOOST_TEST(co_await l.count(asio::use_awaitable) == 0u);
        ran = true;
    });
    io.run_for(5s);
    BOOST_TEST(ran);
}

BOOST_AUTO_TEST_CASE(another_count_on_the_same_name_is_refused_and_changes_nothing)
{
    bool ran = false;
    spawn([&]() -> asio::awaitable<void> {
        dlock::latch l(reg, "n", 2), wrong(reg, "n", 5);
        co_await l.count_down("a", asio::use_awaitable);
        auto [ec, left] = co_await wrong.count_down("b", tuple);
        BOOST_TEST(ec == dlock::error::count_mismatch);
        BOOST_TEST(!ec.message().empty());
        auto [ec2, n] = co_await wrong.count(tuple);
        BOOST_TEST(ec2 == dlock::error::count_mismatch);
        auto [ec3] = co_await wrong.wait(tuple);
        BOOST_TEST(ec3 == dlock::error::count_mismatch);
        BOOST_TEST(co_await l.count(asio::use_awaitable) == 1u);  // b was not counted
        BOOST_TEST(store.watch_count() == 0u);
        ran = true;
    });
    io.run_for(5s);
    BOOST_TEST(ran);
}

BOOST_AUTO_TEST_CASE(bad_arguments_give_clear_errors_without_touching_the_store)
{
    bool ran = false;
    spawn([&]() -> asio::awaitable<void> {
        dlock::latch zero(reg, "z", 0);
        auto [ec, n] = co_await zero.count_down(tuple);
        BOOST_TEST(ec == dlock::error::invalid_option);
        auto [ecw] = co_await zero.wait(tuple);
        BOOST_TEST(ecw == dlock::error::invalid_option);
        dlock::latch huge(reg, "h", dlock::max_latch_count + 1);
        BOOST_TEST(std::get<0>(co_await huge.count(tuple)) == dlock::error::invalid_option);
        dlock::latch ok(reg, "ok", 2);
        BOOST_TEST(std::get<0>(co_await ok.count_down("", tuple)) == dlock::error::invalid_option);
        dlock::latch noname(reg, "", 2);
        BOOST_TEST(std::get<0>(co_await noname.count_down(tuple)) == dlock::error::invalid_name);
        dlock::latch nottl(reg, "t", 2, {.ttl = 0ms});
        BOOST_TEST(std::get<0>(co_await nottl.count_down(tuple)) == dlock::error::invalid_lease);
        dlock::latch empty;
        BOOST_TEST(std::get<0>(co_await empty.wait(tuple)) == dlock::error::invalid_handle);
        // The store checks too, for callers of the contract itself.
        auto [es, r] = co_await store.async_count_down("x", "m", 0, 1s, tuple);
        BOOST_TEST(es == dlock::error::invalid_option);
        auto [eh, rh] = co_await store.async_count_down("x", "m", dlock::max_latch_count + 1, 1s, tuple);
        BOOST_TEST(eh == dlock::error::invalid_option);
        BOOST_TEST(co_await ok.count(asio::use_awaitable) == 2u);
        ran = true;
    });
    io.run_for(5s);
    BOOST_TEST(ran);
}

BOOST_AUTO_TEST_CASE(waiters_wake_on_the_last_count_down_and_not_before)
{
    int woken = 0;
    int counted = 0;
    dlock::latch l(reg, "w", 3);
    for (int i = 0; i < 2; ++i)
        spawn([&]() -> asio::awaitable<void> {
            co_await l.wait(asio::use_awaitable);
            BOOST_TEST(counted == 3);  // never before the last count-down
            ++woken;
        });
    spawn([&]() -> asio::awaitable<void> {
        BOOST_TEST(co_await until([&] { return store.watch_count() == 2; }));
        for (const char* m : {"a", "b"}) {
            co_await l.count_down(m, asio::use_awaitable);
            ++counted;
            // Give the waiters every chance to wake early.
            BOOST_TEST(!co_await until([&] { return woken > 0; }));
        }
        ++counted;
        co_await l.count_down("c", asio::use_awaitable);
        BOOST_TEST(co_await until([&] { return woken == 2; }));
        BOOST_TEST(store.watch_count() == 0u);
        // Waiting on a done latch completes at once.
        co_await l.wait(asio::use_awaitable);
    });
    io.run_for(5s);
    BOOST_TEST(woken == 2);
}

BOOST_AUTO_TEST_CASE(a_cancelled_wait_leaves_no_watch_behind)
{
    bool ran = false;
    spawn([&]() -> asio::awaitable<void> {
        dlock::latch l(reg, "c", 2);
        for (auto type :
             {asio::cancellation_type::terminal, asio::cancellation_type::partial, asio::cancellation_type::total}) {
            asio::cancellation_signal sig;
            std::optional<error_code> result;
            l.wait(asio::bind_cancellation_slot(sig.slot(), [&](error_code ec) { result = ec; }));
            BOOST_TEST(co_await until([&] { return store.watch_count() == 1; }));
            sig.emit(type);
            BOOST_TEST(co_await until([&] { return result.has_value(); }));
            BOOST_TEST(*result == asio::error::operation_aborted);
            BOOST_TEST(store.watch_count() == 0u);
        }
        // A timed-out wait as well.
        auto [ec] = co_await l.wait_for(20ms, tuple);
        BOOST_TEST(ec == dlock::error::timeout);
        BOOST_TEST(store.watch_count() == 0u);
        auto [ec0] = co_await l.wait_for(0ms, tuple);
        BOOST_TEST(ec0 == dlock::error::timeout);
        ran = true;
    });
    io.run_for(5s);
    BOOST_TEST(ran);
}

BOOST_AUTO_TEST_CASE(transient_errors_are_retried_with_the_same_member_and_permanent_ones_fail)
{
    bool ran = false;
    spawn([&]() -> asio::awaitable<void> {
        dlock::latch l(reg, "r", 2);
        store.fail_next(dlock::error::connection_lost, {}, 2);
        BOOST_TEST(co_await l.count_down(asio::use_awaitable) == 1u);
        store.fail_next(dlock::error::permission_denied, "NOPERM", 1);
        auto [ec, n] = co_await l.count_down(tuple);
        BOOST_TEST(ec == dlock::error::permission_denied);
        BOOST_TEST(co_await l.count(asio::use_awaitable) == 1u);
        ran = true;
    });
    io.run_for(5s);
    BOOST_TEST(ran);
}

BOOST_AUTO_TEST_CASE(an_expired_latch_starts_afresh)
{
    bool ran = false;
    spawn([&]() -> asio::awaitable<void> {
        dlock::latch l(reg, "e", 1, {.ttl = 30ms});
        BOOST_TEST(co_await l.count_down(asio::use_awaitable) == 0u);
        asio::steady_timer t(io, 60ms);  // past the latch's ttl
        co_await t.async_wait(asio::use_awaitable);
        BOOST_TEST(co_await l.count(asio::use_awaitable) == 1u);
        ran = true;
    });
    io.run_for(5s);
    BOOST_TEST(ran);
}

// Issue 29: the README's call, a member named by a string literal with the default token
// (`co_await done.count_down("worker-3")`), used to pick the token overload and not compile.
BOOST_AUTO_TEST_CASE(a_member_named_by_a_literal_with_the_default_token)
{
    bool ran = false;
    spawn([&]() -> asio::awaitable<void> {
        dlock::latch l(reg, "literal", 2);
        BOOST_TEST(co_await l.count_down("worker-3") == 1u);
        BOOST_TEST(co_await l.count_down("worker-3") == 1u);  // the same member: once
        const std::string member = "worker-4";
        BOOST_TEST(co_await l.count_down(member) == 0u);
        BOOST_TEST(co_await l.count_down() == 0u);
        ran = true;
    });
    io.run_for(5s);
    BOOST_TEST(ran);
}

BOOST_AUTO_TEST_SUITE_END()
