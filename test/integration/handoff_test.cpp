// SPDX-License-Identifier: BSL-1.0
// Direct hand-off: a release gives the name to the first live waiter queued at the server.
#include <dlock/dlock.hpp>

#include "common/redis_server.hpp"
#include "integration/lock_test_util.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/test/unit_test.hpp>

#include <vector>

using namespace asio::experimental::awaitable_operators;
using dlock::test::eventually;
using dlock::test::key_count;
using dlock::test::spawn;

namespace {

// Two or more clients of one server, each with its own connections, as processes would be.
struct client {
    client(asio::io_context& io, const dlock::test::redis_server& srv, std::chrono::milliseconds lease = 30s)
        : store(io.get_executor(), srv.config()), reg(store, {.lease = lease})
    {
    }
    dlock::redis_store store;
    dlock::registry reg;
};

std::string llen(const dlock::test::redis_server& srv, const client& c, const std::string& name)
{
    return srv.cli({"LLEN", c.store.queue_key("dlock:" + name)});
}

}  // namespace

BOOST_AUTO_TEST_SUITE(handoff_suite)

BOOST_AUTO_TEST_CASE(fifo_across_clients_with_consecutive_tokens)
{
    dlock::test::redis_server srv;
    asio::io_context io;
    client a(io, srv), b(io, srv), c(io, srv);
    std::vector<std::pair<char, std::uint64_t>> order;
    spawn(io, [&]() -> asio::awaitable<void> {
        auto g = co_await a.reg.obtain("f").acquire();
        order.emplace_back('a', g.fencing_token());
        int done = 0;
        auto waiter = [&](client& who, char tag) -> asio::awaitable<void> {
            auto gw = co_await who.reg.obtain("f").acquire();
            order.emplace_back(tag, gw.fencing_token());
            co_await gw.release();
            ++done;
        };
        spawn(io, [&]() { return waiter(b, 'b'); });
        BOOST_TEST(co_await eventually([&] { return llen(srv, b, "f") == "1"; }));
        spawn(io, [&]() { return waiter(c, 'c'); });
        BOOST_TEST(co_await eventually([&] { return llen(srv, c, "f") == "2"; }));
        auto st = co_await a.store.async_status("dlock:f", asio::use_awaitable);
        BOOST_TEST(st.queued == 2u);  // what `dlock status` shows operators
        co_await g.release();
        BOOST_TEST(co_await eventually([&] { return done == 2; }));
        a.store.close();
        b.store.close();
        c.store.close();
    });
    io.run_for(30s);
    BOOST_TEST_REQUIRE(order.size() == 3u);
    BOOST_TEST(order[1].first == 'b');
    BOOST_TEST(order[2].first == 'c');
    BOOST_TEST(order[1].second == order[0].second + 1);
    BOOST_TEST(order[2].second == order[1].second + 1);
    BOOST_TEST(b.reg.stats().store_handoffs == 1u);
    BOOST_TEST(c.reg.stats().store_handoffs == 1u);
    BOOST_TEST(key_count(srv, "*") == "1");  // the fencing counter only
}

// The release is sent after a PING, so the server writes the grant to the waiter before
// the release's reply to its caller (it writes the client it queued a reply for last
// first): the waiter is woken first. Both clients share this io_context, so the order in
// which the two completions run is the order in which the bytes arrived.
BOOST_AUTO_TEST_CASE(the_waiter_is_woken_before_the_releaser)
{
    dlock::test::redis_server srv;
    asio::io_context io;
    client a(io, srv), b(io, srv);
    std::vector<char> order;
    spawn(io, [&]() -> asio::awaitable<void> {
        for (int round = 0; round < 5; ++round) {
            auto g = co_await a.reg.obtain("w").acquire();
            bool done = false;
            spawn(io, [&]() -> asio::awaitable<void> {
                auto gw = co_await b.reg.obtain("w").acquire();
                order.push_back('w');
                co_await gw.release();
                done = true;
            });
            BOOST_TEST(co_await eventually([&] { return llen(srv, b, "w") == "1"; }));
            co_await g.release();
            order.push_back('r');
            BOOST_TEST(co_await eventually([&] { return done; }));
        }
        a.store.close();
        b.store.close();
    });
    io.run_for(30s);
    BOOST_TEST_REQUIRE(order.size() == 10u);
    for (std::size_t i = 0; i < order.size(); i += 2)
        BOOST_TEST((order[i] == 'w' && order[i + 1] == 'r'), "round " << i / 2);
    BOOST_TEST(b.reg.stats().store_handoffs == 5u);
}

// An entry whose waiter no longer listens (its process died) is skipped, not granted.
BOOST_AUTO_TEST_CASE(a_dead_waiter_is_skipped)
{
    dlock::test::redis_server srv;
    asio::io_context io;
    client a(io, srv), b(io, srv);
    std::uint64_t fence_a = 0, fence_b = 0;
    spawn(io, [&]() -> asio::awaitable<void> {
        auto g = co_await a.reg.obtain("d").acquire();
        fence_a = g.fencing_token();
        // A queued token with no subscriber on its grant channel, ahead of b.
        srv.cli({"RPUSH", a.store.queue_key("dlock:d"), "ghost"});
        srv.cli({"HSET", a.store.queue_ttl_key("dlock:d"), "ghost", "30000"});
        bool got = false;
        spawn(io, [&]() -> asio::awaitable<void> {
            auto gb = co_await b.reg.obtain("d").acquire();
            fence_b = gb.fencing_token();
            co_await gb.release();
            got = true;
        });
        BOOST_TEST(co_await eventually([&] { return llen(srv, b, "d") == "2"; }));
        co_await g.release();
        BOOST_TEST(co_await eventually([&] { return got; }));
        a.store.close();
        b.store.close();
    });
    io.run_for(30s);
    BOOST_TEST(fence_b == fence_a + 1);
    BOOST_TEST(b.reg.stats().store_handoffs == 1u);
    BOOST_TEST(key_count(srv, "*:queue*") == "0");
    BOOST_TEST(key_count(srv, "*:lock:*") == "0");
}

// The operator's override hands the name on too, rather than stranding the queue.
BOOST_AUTO_TEST_CASE(force_release_hands_on_to_the_queue)
{
    dlock::test::redis_server srv;
    asio::io_context io;
    client a(io, srv), b(io, srv);
    bool got = false, a_lost = false;
    spawn(io, [&]() -> asio::awaitable<void> {
        auto g = co_await a.reg.obtain("o").acquire();
        spawn(io, [&]() -> asio::awaitable<void> {
            auto gb = co_await b.reg.obtain("o").acquire();
            co_await gb.release();
            got = true;  // after the release: the stores close once `got` is seen
        });
        BOOST_TEST(co_await eventually([&] { return llen(srv, b, "o") == "1"; }));
        BOOST_TEST(co_await a.store.async_force_release("dlock:o", asio::use_awaitable));
        BOOST_TEST(co_await eventually([&] { return got; }));
        auto [ec] = co_await g.release(asio::as_tuple(asio::use_awaitable));
        a_lost = ec == dlock::error::lock_lost;
        a.store.close();
        b.store.close();
    });
    io.run_for(30s);
    BOOST_TEST(got);
    BOOST_TEST(a_lost);
    BOOST_TEST(key_count(srv, "*:lock:*") == "0");
}

// A hand-off after a long wait cannot bound the lease's start closely enough: the waiter
// confirms it with one attempt, and still gets the next token.
BOOST_AUTO_TEST_CASE(a_handoff_after_a_long_wait_is_confirmed)
{
    dlock::test::redis_server srv;
    asio::io_context io;
    client a(io, srv), b(io, srv, 300ms);
    std::uint64_t fence_a = 0, fence_b = 0;
    clock_type::duration left{};
    spawn(io, [&]() -> asio::awaitable<void> {
        auto g = co_await a.reg.obtain("l").acquire();
        fence_a = g.fencing_token();
        bool got = false;
        spawn(io, [&]() -> asio::awaitable<void> {
            auto gb = co_await b.reg.obtain("l").acquire();
            fence_b = gb.fencing_token();
            left = gb.valid_until() - clock_type::now();
            co_await gb.release();
            got = true;
        });
        BOOST_TEST(co_await eventually([&] { return llen(srv, b, "l") == "1"; }));
        // Longer than half of b's 300 ms lease has passed since b queued.
        asio::steady_timer t(io, 200ms);
        co_await t.async_wait(asio::use_awaitable);
        co_await g.release();
        BOOST_TEST(co_await eventually([&] { return got; }));
        a.store.close();
        b.store.close();
    });
    io.run_for(30s);
    BOOST_TEST(fence_b == fence_a + 1);
    BOOST_TEST(b.reg.stats().store_handoffs == 0u);
    BOOST_TEST(left > 200ms);  // a full lease from the confirming attempt
}

// A waiter with a short lease must not cut short the queue entry of one with a long lease,
// and an empty token is a token like any other (only force_release overrides the holder).
BOOST_AUTO_TEST_CASE(queue_expiry_only_grows_and_an_empty_token_forces_nothing)
{
    dlock::test::redis_server srv;
    asio::io_context io;
    client a(io, srv), b(io, srv, 60s), c(io, srv, 1s);
    long long pttl_after_long = 0, pttl_after_short = 0;
    bool empty_released = true;
    spawn(io, [&]() -> asio::awaitable<void> {
        auto g = co_await a.reg.obtain("e").acquire();
        int done = 0;
        auto waiter = [&](client& who) -> asio::awaitable<void> {
            auto gw = co_await who.reg.obtain("e").acquire();
            co_await gw.release();
            ++done;
        };
        spawn(io, [&]() { return waiter(b); });
        BOOST_TEST(co_await eventually([&] { return llen(srv, b, "e") == "1"; }));
        pttl_after_long = std::stoll(srv.cli({"PTTL", a.store.queue_key("dlock:e")}));
        spawn(io, [&]() { return waiter(c); });
        BOOST_TEST(co_await eventually([&] { return llen(srv, c, "e") == "2"; }));
        pttl_after_short = std::stoll(srv.cli({"PTTL", a.store.queue_key("dlock:e")}));
        empty_released = co_await a.store.async_release("dlock:e", "", asio::use_awaitable);
        co_await g.release();
        BOOST_TEST(co_await eventually([&] { return done == 2; }));
        a.store.close();
        b.store.close();
        c.store.close();
    });
    io.run_for(30s);
    BOOST_TEST(pttl_after_long > 60'000);  // the holder's 30 s + b's 60 s
    BOOST_TEST(pttl_after_short > 60'000);
    BOOST_TEST(!empty_released);
    BOOST_TEST(b.reg.stats().store_handoffs == 1u);
    BOOST_TEST(c.reg.stats().store_handoffs == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
