// SPDX-License-Identifier: BSL-1.0
// redis::subscriber and redis::subscription against real servers: refcounted channels,
// events, reconnects and receive cancellation.
#include <dlock/error.hpp>
#include <dlock/redis/subscriber.hpp>

#include "common/redis_server.hpp"
#include "integration/support.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace dlock;
using namespace std::chrono_literals;
using boost::system::error_code;
using redis::event_kind;

namespace dlock::redis {
inline std::ostream& boost_test_print_type(std::ostream& os, event_kind k)
{
    switch (k) {
    case event_kind::subscribed: return os << "subscribed";
    case event_kind::message: return os << "message";
    case event_kind::disconnected: return os << "disconnected";
    case event_kind::resubscribed: return os << "resubscribed";
    }
    return os << "event_kind(" << static_cast<int>(k) << ')';
}
}  // namespace dlock::redis

namespace {

// Records what listeners are told and wakes the test coroutine.
struct event_log {
    explicit event_log(asio::any_io_executor ex) : n(std::move(ex)) {}

    redis::subscriber::listener listener(std::string tag = {})
    {
        return [this, tag](const redis::event& ev) {
            events.push_back(ev);
            tags.push_back(tag);
            n.notify();
        };
    }

    std::size_t count(event_kind kind, const std::string& channel, const std::string& tag = "*") const
    {
        std::size_t c = 0;
        for (std::size_t i = 0; i < events.size(); ++i)
            c += events[i].kind == kind && events[i].channel == channel && (tag == "*" || tags[i] == tag);
        return c;
    }

    asio::awaitable<bool> wait_for(event_kind kind, const std::string& channel, std::size_t times = 1,
                                   const std::string& tag = "*")
    {
        co_return co_await n.wait([&] { return count(kind, channel, tag) >= times; });
    }

    std::vector<event_kind> kinds(const std::string& channel) const
    {
        std::vector<event_kind> out;
        for (auto& e : events)
            if (e.channel == channel)
                out.push_back(e.kind);
        return out;
    }

    test::notifier n;
    std::vector<redis::event> events;
    std::vector<std::string> tags;
};

// PUBSUB NUMSUB prints the channel, then its subscriber count.
int numsub(const test::redis_server& srv, const std::string& channel)
{
    auto out = srv.cli({"PUBSUB", "NUMSUB", channel});
    return std::stoi(out.substr(out.rfind('\n') + 1));
}

redis::config fast_reconnect(redis::config c)
{
    c.reconnect_min = 5ms;
    c.reconnect_max = 50ms;
    return c;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(subscriber_suite)

BOOST_AUTO_TEST_CASE(subscription_receives_published_messages)
{
    test::redis_server srv;
    asio::io_context io;
    redis::subscriber sub(io.get_executor(), srv.config());
    test::run_test(io, [&]() -> asio::awaitable<void> {
        BOOST_TEST_REQUIRE(!co_await test::connect(sub));
        redis::subscription s(sub, "news");
        auto ev = co_await s.async_receive(asio::use_awaitable);
        BOOST_TEST(ev.kind == event_kind::subscribed);
        BOOST_TEST(ev.channel == "news");
        BOOST_TEST(sub.is_subscribed("news"));
        BOOST_TEST(numsub(srv, "news") == 1);

        std::vector<std::string> payloads = {"hello", "", "with spaces and\r\nnewlines", std::string(100000, 'p')};
        for (auto& p : payloads)
            BOOST_TEST(srv.cli({"PUBLISH", "news", p}) == "1");
        for (auto& p : payloads) {
            ev = co_await s.async_receive(asio::use_awaitable);
            BOOST_TEST(ev.kind == event_kind::message);
            BOOST_TEST(ev.channel == "news");
            BOOST_TEST(ev.payload == p);
        }
        BOOST_TEST(s.queued() == 0u);
        // Other channels do not reach this subscription.
        BOOST_TEST(srv.cli({"PUBLISH", "other", "x"}) == "0");
    });
}

BOOST_AUTO_TEST_CASE(listen_before_connect)
{
    // No async_connect: the first listen starts the connection. Its listener must hear
    // `subscribed`, not `resubscribed`: nothing was lost, this is the first subscription.
    test::redis_server srv;
    asio::io_context io;
    redis::subscriber sub(io.get_executor(), srv.config());
    event_log log(io.get_executor());
    test::run_test(io, [&]() -> asio::awaitable<void> {
        sub.listen("early", log.listener());
        BOOST_TEST_REQUIRE(co_await log.wait_for(event_kind::subscribed, "early"));
        BOOST_TEST(srv.cli({"PUBLISH", "early", "m"}) == "1");
        BOOST_TEST_REQUIRE(co_await log.wait_for(event_kind::message, "early"));
        auto kinds = log.kinds("early");
        std::vector<event_kind> expected = {event_kind::subscribed, event_kind::message};
        BOOST_TEST(kinds == expected, boost::test_tools::per_element());
    });
}

BOOST_AUTO_TEST_CASE(listener_refcounts)
{
    test::redis_server srv;
    asio::io_context io;
    redis::subscriber sub(io.get_executor(), srv.config());
    event_log log(io.get_executor());
    test::run_test(io, [&]() -> asio::awaitable<void> {
        BOOST_TEST_REQUIRE(!co_await test::connect(sub));
        auto a = sub.listen("ch", log.listener("a"));
        auto b = sub.listen("ch", log.listener("b"));
        BOOST_TEST(sub.channel_count() == 1u);
        BOOST_TEST(sub.listener_count() == 2u);
        BOOST_TEST_REQUIRE(co_await log.wait_for(event_kind::subscribed, "ch", 2));
        BOOST_TEST(log.count(event_kind::subscribed, "ch", "a") == 1u);
        BOOST_TEST(log.count(event_kind::subscribed, "ch", "b") == 1u);
        BOOST_TEST(numsub(srv, "ch") == 1);

        // One server-side subscription, both listeners get every message.
        BOOST_TEST(srv.cli({"PUBLISH", "ch", "one"}) == "1");
        BOOST_TEST_REQUIRE(co_await log.wait_for(event_kind::message, "ch", 2));
        BOOST_TEST(log.count(event_kind::message, "ch", "a") == 1u);
        BOOST_TEST(log.count(event_kind::message, "ch", "b") == 1u);

        // A listener joining a confirmed channel is told so, later (posted), not inline.
        auto c = sub.listen("ch", log.listener("c"));
        BOOST_TEST(log.count(event_kind::subscribed, "ch", "c") == 0u);
        BOOST_TEST_REQUIRE(co_await log.wait_for(event_kind::subscribed, "ch", 1, "c"));
        sub.unlisten(c);

        // Removing one listener keeps the channel.
        sub.unlisten(a);
        BOOST_TEST(sub.channel_count() == 1u);
        BOOST_TEST(sub.listener_count() == 1u);
        BOOST_TEST(srv.cli({"PUBLISH", "ch", "two"}) == "1");
        BOOST_TEST_REQUIRE(co_await log.wait_for(event_kind::message, "ch", 2, "b"));
        BOOST_TEST(log.count(event_kind::message, "ch", "a") == 1u);  // none after unlisten

        // Removing the last one unsubscribes. The server handles one connection's commands in
        // order, so once a later SUBSCRIBE is confirmed the UNSUBSCRIBE has been done.
        sub.unlisten(b);
        sub.unlisten(b);  // unknown ids are ignored
        BOOST_TEST(sub.channel_count() == 0u);
        BOOST_TEST(sub.listener_count() == 0u);
        BOOST_TEST(!sub.is_subscribed("ch"));
        auto marker = sub.listen("marker", log.listener());
        BOOST_TEST_REQUIRE(co_await log.wait_for(event_kind::subscribed, "marker"));
        BOOST_TEST(numsub(srv, "ch") == 0);
        BOOST_TEST(srv.cli({"PUBLISH", "ch", "three"}) == "0");
        sub.unlisten(marker);
    });
}

BOOST_AUTO_TEST_CASE(unlisten_from_inside_a_listener)
{
    test::redis_server srv;
    asio::io_context io;
    redis::subscriber sub(io.get_executor(), srv.config());
    event_log log(io.get_executor());
    int once_calls = 0;
    test::run_test(io, [&]() -> asio::awaitable<void> {
        BOOST_TEST_REQUIRE(!co_await test::connect(sub));
        redis::subscriber::listener_id once = 0;
        once = sub.listen("ch", [&](const redis::event& ev) {
            ++once_calls;
            if (ev.kind == event_kind::message)
                sub.unlisten(once);  // drops itself while being called
        });
        sub.listen("ch", log.listener());
        BOOST_TEST_REQUIRE(co_await log.wait_for(event_kind::subscribed, "ch"));
        BOOST_TEST(srv.cli({"PUBLISH", "ch", "1"}) == "1");
        BOOST_TEST(srv.cli({"PUBLISH", "ch", "2"}) == "1");
        BOOST_TEST_REQUIRE(co_await log.wait_for(event_kind::message, "ch", 2));
        BOOST_TEST(once_calls == 2);  // subscribed + the first message only
        BOOST_TEST(sub.listener_count() == 1u);
        BOOST_TEST(sub.channel_count() == 1u);
    });
}

BOOST_AUTO_TEST_CASE(resubscribe_after_server_restart)
{
    test::redis_server srv;
    asio::io_context io;
    redis::subscriber sub(io.get_executor(), fast_reconnect(srv.config()));
    event_log log(io.get_executor());
    test::run_test(io, [&]() -> asio::awaitable<void> {
        BOOST_TEST_REQUIRE(!co_await test::connect(sub));
        sub.listen("alpha", log.listener());
        sub.listen("beta", log.listener());
        BOOST_TEST_REQUIRE(co_await log.wait_for(event_kind::subscribed, "alpha"));
        BOOST_TEST_REQUIRE(co_await log.wait_for(event_kind::subscribed, "beta"));

        srv.kill();
        BOOST_TEST_REQUIRE(co_await log.wait_for(event_kind::disconnected, "alpha"));
        BOOST_TEST_REQUIRE(co_await log.wait_for(event_kind::disconnected, "beta"));
        BOOST_TEST(!sub.is_subscribed("alpha"));

        srv.start();
        BOOST_TEST_REQUIRE(co_await log.wait_for(event_kind::resubscribed, "alpha"));
        BOOST_TEST_REQUIRE(co_await log.wait_for(event_kind::resubscribed, "beta"));
        BOOST_TEST(sub.is_subscribed("alpha"));
        BOOST_TEST(numsub(srv, "alpha") == 1);

        BOOST_TEST(srv.cli({"PUBLISH", "alpha", "after-restart"}) == "1");
        BOOST_TEST_REQUIRE(co_await log.wait_for(event_kind::message, "alpha"));
        auto kinds = log.kinds("alpha");
        std::vector<event_kind> expected = {event_kind::subscribed, event_kind::disconnected, event_kind::resubscribed,
                                            event_kind::message};
        BOOST_TEST(kinds == expected, boost::test_tools::per_element());
        BOOST_TEST(log.events.back().payload == "after-restart");
        BOOST_TEST(sub.stats().connects == 2u);
    });
}

BOOST_AUTO_TEST_CASE(subscription_across_restart)
{
    test::redis_server srv;
    asio::io_context io;
    redis::subscriber sub(io.get_executor(), fast_reconnect(srv.config()));
    test::run_test(io, [&]() -> asio::awaitable<void> {
        redis::subscription s(sub, "jobs");
        BOOST_TEST((co_await s.async_receive(asio::use_awaitable)).kind == event_kind::subscribed);
        srv.kill();
        BOOST_TEST((co_await s.async_receive(asio::use_awaitable)).kind == event_kind::disconnected);
        srv.start();
        BOOST_TEST((co_await s.async_receive(asio::use_awaitable)).kind == event_kind::resubscribed);
        BOOST_TEST(srv.cli({"PUBLISH", "jobs", "j1"}) == "1");
        auto ev = co_await s.async_receive(asio::use_awaitable);
        BOOST_TEST(ev.kind == event_kind::message);
        BOOST_TEST(ev.payload == "j1");
    });
}

BOOST_AUTO_TEST_CASE(receive_cancellation_keeps_events)
{
    using namespace asio::experimental::awaitable_operators;
    test::redis_server srv;
    asio::io_context io;
    redis::subscriber sub(io.get_executor(), srv.config());
    test::run_test(io, [&]() -> asio::awaitable<void> {
        redis::subscription s(sub, "quiet");
        BOOST_TEST((co_await s.async_receive(asio::use_awaitable)).kind == event_kind::subscribed);

        asio::steady_timer timer(co_await asio::this_coro::executor, 50ms);
        auto r = co_await (s.async_receive(asio::use_awaitable) || timer.async_wait(asio::use_awaitable));
        BOOST_TEST(r.index() == 1u);  // nothing was published: the timer won

        // Published after the cancelled receive: queued, then taken by the next receive.
        BOOST_TEST(srv.cli({"PUBLISH", "quiet", "late"}) == "1");
        auto ev = co_await s.async_receive(asio::use_awaitable);
        BOOST_TEST(ev.kind == event_kind::message);
        BOOST_TEST(ev.payload == "late");
    });
}

BOOST_AUTO_TEST_CASE(subscription_destroyed_while_receiving)
{
    test::redis_server srv;
    asio::io_context io;
    redis::subscriber sub(io.get_executor(), srv.config());
    test::notifier n(io.get_executor());
    test::run_test(io, [&]() -> asio::awaitable<void> {
        std::optional<redis::subscription> s(std::in_place, sub, "gone");
        BOOST_TEST((co_await s->async_receive(asio::use_awaitable)).kind == event_kind::subscribed);

        bool first_done = false, second_done = false;
        error_code first_ec, second_ec;
        s->async_receive([&](error_code ec, redis::event) {
            first_done = true;
            first_ec = ec;
            n.notify();
        });
        // One receive at a time.
        s->async_receive([&](error_code ec, redis::event) {
            second_done = true;
            second_ec = ec;
            n.notify();
        });
        BOOST_TEST_REQUIRE(co_await n.wait([&] { return second_done; }));
        BOOST_TEST(second_ec == error::invalid_request);
        BOOST_TEST(!first_done);

        s.reset();
        BOOST_TEST(!first_done);  // posted, not inline
        BOOST_TEST_REQUIRE(co_await n.wait([&] { return first_done; }));
        BOOST_TEST(first_ec == error::closed);
        BOOST_TEST(sub.listener_count() == 0u);
        BOOST_TEST(sub.channel_count() == 0u);
    });
}

BOOST_AUTO_TEST_SUITE_END()
