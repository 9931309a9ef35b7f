// The store contract suite, shared by every store's test file: run_contract() drives one
// store through the contract's checks.
#pragma once

#include <dlock/store.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <functional>
#include <string>
#include <vector>

namespace dlock::test {

namespace asio = boost::asio;
using namespace std::chrono_literals;

inline asio::awaitable<void> check_contract(dlock::store& st, std::function<void()> stop)
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

    // Free: taken, with a fencing token.
    auto a = co_await st.async_try_acquire(name, "owner-a", 5s, asio::use_awaitable);
    BOOST_TEST(a.acquired);
    BOOST_TEST(a.fencing_token > 0u);
    // The same token again (a retry after a lost reply): still ours, same fencing token.
    auto again = co_await st.async_try_acquire(name, "owner-a", 5s, asio::use_awaitable);
    BOOST_TEST(again.acquired);
    BOOST_TEST(again.fencing_token == a.fencing_token);
    // Another owner: refused, told how long the lease has left.
    auto b = co_await st.async_try_acquire(name, "owner-b", 5s, asio::use_awaitable);
    BOOST_TEST(!b.acquired);
    BOOST_TEST(b.holder_ttl.count() > 4000);
    BOOST_TEST(b.holder_ttl.count() <= 5000);
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
    // Release: never someone else's; our own once, then no longer ours.
    BOOST_TEST(!(co_await st.async_release(name, "owner-b", asio::use_awaitable)));
    BOOST_TEST((co_await st.async_release(name, "owner-a", asio::use_awaitable)));
    BOOST_TEST(!(co_await st.async_release(name, "owner-a", asio::use_awaitable)));
    for (int i = 0; i < 500 && events.size() < 2; ++i) {
        t.expires_after(2ms);
        co_await t.async_wait(asio::use_awaitable);
    }
    BOOST_REQUIRE(events.size() >= 2u);
    BOOST_TEST((events[1] == dlock::watch_event::released));
    // A new lease: a larger fencing token.
    auto c = co_await st.async_try_acquire(name, "owner-b", 5s, asio::use_awaitable);
    BOOST_TEST(c.acquired);
    BOOST_TEST(c.fencing_token > a.fencing_token);
    // The operator's override frees it whoever holds it.
    BOOST_TEST((co_await st.async_force_release(name, asio::use_awaitable)));
    auto s2 = co_await st.async_status(name, asio::use_awaitable);
    BOOST_TEST(!s2.held);
    // Expiry: a short lease ends by itself.
    auto d = co_await st.async_try_acquire(name, "owner-c", 50ms, asio::use_awaitable);
    BOOST_TEST(d.acquired);
    t.expires_after(120ms);
    co_await t.async_wait(asio::use_awaitable);
    auto e = co_await st.async_try_acquire(name, "owner-d", 5s, asio::use_awaitable);
    BOOST_TEST(e.acquired);
    BOOST_TEST(e.fencing_token > d.fencing_token);  // never reset by expiry
    co_await st.async_release(name, "owner-d", asio::use_awaitable);
    st.unwatch(id);
    stop();
}

inline void run_contract(asio::io_context& io, dlock::store& st, std::function<void()> stop)
{
    bool finished = false;
    asio::co_spawn(io, check_contract(st, std::move(stop)), [&](std::exception_ptr e) {
        finished = true;
        if (e)
            std::rethrow_exception(e);
    });
    io.run_for(30s);
    BOOST_TEST(finished);
}


}  // namespace dlock::test
