// SPDX-License-Identifier: BSL-1.0
// etcd as a family of the consensus scenarios (consensus/scenarios.hpp): its store and cluster,
// its URLs, and what only etcd can say or be given wrong.
#pragma once

#include <dlock/dlock.hpp>
#include <dlock/etcd.hpp>

#include "common/etcd_cluster.hpp"
#include "integration/consensus/support.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>

namespace dlock::test {

struct etcd_family : consensus_family_base<dlock::etcd_store, etcd_cluster, dlock::etcd::config,
                                           dlock::etcd::config_error, &dlock::etcd::parse_url> {
    static constexpr const char* scheme = "etcd";

    // Leases are the lock's own (no session to outlive an election); a Redis answers HTTP by
    // closing, which no retry mends; a request over --max-request-bytes is refused as such;
    // status() tells a holder's time left to any store (etcd keeps the lease's TTL).
    static inline const consensus_words words{.holder_outlives_an_election = false,
                                              .not_the_store = dlock::error::protocol_error,
                                              .not_the_store_text = "did not answer as an etcd v3 gateway",
                                              .not_the_store_is_transient = false,
                                              .too_big = dlock::error::invalid_request,
                                              .too_big_text = "max-request-bytes",
                                              .time_left_lease = std::chrono::seconds(1),
                                              .time_left_above = 0,
                                              .time_left_at_most = 1000,
                                              .others_see_time_left = true};

    /// The cluster's URL; `session` is the lock's lease here, so it changes nothing.
    static std::string url(const cluster& c, std::chrono::milliseconds /*session*/ = {}) { return c.url(); }
    /// Requests bounded at 1 s, so that a lost quorum shows within an acquire's bound.
    static config short_requests(const cluster& c)
    {
        auto cfg = config_of(c.url());
        cfg.request_timeout = std::chrono::seconds(1);
        return cfg;
    }
    static std::string whereabouts(const store& st) { return st.current_member(); }
    static std::string not_the_store_url(std::uint16_t port) { return "etcd://127.0.0.1:" + std::to_string(port); }

    /// etcd's sessions are leases the store asks for: nothing to refuse before them.
    static boost::asio::awaitable<void> refuses_sessions_it_cannot_have(const cluster&) { co_return; }

    /// A lease not in whole seconds (refused by the store, and by a registry before anything
    /// is sent), and a member's peer port (HTTP, but not the gateway): each a permanent error.
    static boost::asio::awaitable<void> refuses_its_own_bad_input(const cluster& c, store& st)
    {
        namespace asio = boost::asio;
        using namespace std::chrono_literals;
        const auto use_tuple = asio::as_tuple(asio::use_awaitable);
        auto [e1, r1] = co_await st.async_try_acquire("b", "t", 1500ms, use_tuple);
        BOOST_TEST((e1 == dlock::error::invalid_lease));
        BOOST_TEST(st.last_error_text().find("whole seconds") != std::string::npos);
        dlock::registry bad(st, {.lease = 1500ms});
        auto [e2, g2] = co_await bad.obtain("b").try_acquire(use_tuple);
        BOOST_TEST(!!e2);
        BOOST_TEST(!g2);
        store peer(co_await asio::this_coro::executor, config_of("etcd://127.0.0.1:" + std::to_string(c.peer_port(0))));
        auto [e3, r3] = co_await peer.async_try_acquire("b", "t", 2s, use_tuple);
        BOOST_TEST((e3 == dlock::error::protocol_error), peer.describe() << ": " << e3.message());
        BOOST_TEST(!dlock::is_transient(e3));
        BOOST_TEST_MESSAGE(peer.last_error_text());
        peer.close();
    }
};

}  // namespace dlock::test
