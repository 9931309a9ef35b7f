// SPDX-License-Identifier: BSL-1.0
// ZooKeeper as a family of the consensus scenarios (consensus/scenarios.hpp): its store and
// ensemble, its URLs (with the session timeout asked for), and what only ZooKeeper can say or
// be given wrong.
#pragma once

#include <dlock/dlock.hpp>
#include <dlock/zookeeper.hpp>

#include "common/zk_ensemble.hpp"
#include "integration/consensus/support.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>

namespace dlock::test {

struct zookeeper_family : consensus_family_base<dlock::zookeeper_store, zk_ensemble, dlock::zookeeper::config,
                                                dlock::zookeeper::config_error, &dlock::zookeeper::parse_url> {
    static constexpr const char* scheme = "zk";

    // A session outlives an election; a Redis never completes the handshake, which is a
    // connect that failed (retried); a request over jute.maxbuffer would close the connection,
    // so the store refuses the name; status() tells the time left of its own session's holder
    // only (another session's deadline it cannot know).
    static inline const consensus_words words{.holder_outlives_an_election = true,
                                              .not_the_store = dlock::error::connect_failed,
                                              .not_the_store_text = "not ZooKeeper",
                                              .not_the_store_is_transient = true,
                                              .too_big = dlock::error::invalid_name,
                                              .too_big_text = "jute.maxbuffer",
                                              .time_left_lease = std::chrono::seconds(2),
                                              .time_left_above = 2000,
                                              .time_left_at_most = 4000,
                                              .others_see_time_left = false};

    /// The ensemble's URL asking for a session of `session` (the servers' default if zero).
    static std::string url(const cluster& z, std::chrono::milliseconds session = {})
    {
        if (session.count() == 0)
            return z.url();
        return z.url("?session_timeout=" + std::to_string(session.count()) + "ms");
    }
    /// A short session and connect timeout, so that a lost quorum shows within an acquire's bound.
    static config short_requests(const cluster& z)
    {
        return config_of(z.url("?session_timeout=2s&connect_timeout=2s"));
    }
    static std::string whereabouts(const store& st) { return st.describe(); }
    static std::string not_the_store_url(std::uint16_t port)
    {
        return "zk://127.0.0.1:" + std::to_string(port) + "?connect_timeout=2s";
    }

    /// Session timeouts the servers cannot grant (too short for a handshake, or more than the
    /// handshake can carry): a permanent error at once whose text says which.
    static boost::asio::awaitable<void> refuses_sessions_it_cannot_have(const cluster& z)
    {
        namespace asio = boost::asio;
        using namespace std::chrono_literals;
        const auto use_tuple = asio::as_tuple(asio::use_awaitable);
        auto ex = co_await asio::this_coro::executor;
        store tiny(ex, config_of(z.url("?session_timeout=1ms"))), huge(ex, config_of(z.url("?session_timeout=999h")));
        auto [e1, r1] = co_await tiny.async_try_acquire("b", "t", 2s, use_tuple);
        BOOST_TEST((e1 == dlock::error::invalid_lease), e1.message() << " / " << tiny.last_error_text());
        BOOST_TEST(tiny.last_error_text().find("1 ms is outside the servers' bounds") != std::string::npos,
                   tiny.last_error_text());
        auto [e2, r2] = co_await huge.async_try_acquire("b", "t", 2s, use_tuple);
        BOOST_TEST((e2 == dlock::error::invalid_lease), e2.message() << " / " << huge.last_error_text());
        BOOST_TEST(huge.last_error_text().find("more than ZooKeeper can negotiate") != std::string::npos,
                   huge.last_error_text());
        tiny.close();
        huge.close();
    }

    /// A session timeout below the servers' minimum (2 ticks = 200 ms), names that make no
    /// path (refused before anything is sent), and a 10 KB name, which is a path ZooKeeper takes.
    static boost::asio::awaitable<void> refuses_its_own_bad_input(const cluster& z, store& st)
    {
        namespace asio = boost::asio;
        using namespace std::chrono_literals;
        const auto use_tuple = asio::as_tuple(asio::use_awaitable);
        store too_short(co_await asio::this_coro::executor, config_of(z.url("?session_timeout=50ms")));
        auto [e1, r1] = co_await too_short.async_try_acquire("b", "t", 2s, use_tuple);
        BOOST_TEST((e1 == dlock::error::invalid_lease), e1.message());
        BOOST_TEST(!dlock::is_transient(e1));
        BOOST_TEST(too_short.last_error_text().find("outside the servers' bounds") != std::string::npos,
                   too_short.last_error_text());
        too_short.close();
        for (std::string bad : {std::string("a//b"), std::string("x/"), std::string("nul\0x", 5)}) {
            auto [e3, r3] = co_await st.async_try_acquire(bad, "t", 2s, use_tuple);
            BOOST_TEST((e3 == dlock::error::invalid_name), bad << ": " << e3.message());
        }
        std::string big(10'000, 'n');
        auto r4 = co_await st.async_try_acquire(big, "t", 2s, asio::use_awaitable);
        BOOST_TEST(r4.acquired);
        BOOST_TEST((co_await st.async_release(big, "t", asio::use_awaitable)));
    }
};

}  // namespace dlock::test
