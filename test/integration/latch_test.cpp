// SPDX-License-Identifier: BSL-1.0
// The count-down latch on a real redis-server, with real worker processes
// (integration/latch_worker.cpp): waking exactly at the last count-down, a lost reply
// retried that counts once, cancelled waits that leave no subscription, other stores.
#include <dlock/dlock.hpp>
#include <dlock/redis/store.hpp>

#include "common/child.hpp"
#include "common/redis_server.hpp"
#include "common/tcp_proxy.hpp"
#include "integration/latch_scenarios.hpp"
#include "integration/lock_test_util.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/post.hpp>
#include <boost/test/unit_test.hpp>

#include <optional>

using boost::system::error_code;
using dlock::test::child;
using dlock::test::eventually;
using dlock::test::redis_server;
using dlock::test::spawn;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// Subscribers of `channel` at the server.
int numsub(const redis_server& srv, const std::string& channel)
{
    auto out = srv.cli({"PUBSUB", "NUMSUB", channel});
    auto nl = out.find('\n');
    return nl == std::string::npos ? -1 : std::stoi(out.substr(nl + 1));
}

// Polls the server (bounded) until `channel` has `n` subscribers.
bool numsub_reaches(const redis_server& srv, const std::string& channel, int n)
{
    auto deadline = clock_type::now() + 10s;
    while (clock_type::now() < deadline)
        if (numsub(srv, channel) == n)
            return true;
    return false;
}

// The channel name as the store sees "dlock:<name>", from a store that is never connected.
std::string channel_of(const redis_server& srv, const std::string& name)
{
    asio::io_context io;
    dlock::redis_store st(io.get_executor(), srv.config());
    return st.channel("dlock:" + name);
}

// The latch as the store keeps it, read by a store of its own.
dlock::test::latch::state_fn state_in(const redis_server& srv)
{
    return [cfg = srv.config()](const std::string& name) {
        return dlock::test::latch::state_from<dlock::redis_store>(cfg, name);
    };
}

// A waiter process's watch is in place once the server counts its subscription.
dlock::test::latch::watching_fn watching(const redis_server& srv)
{
    return [&srv](const std::string& name) { return numsub_reaches(srv, channel_of(srv, name), 1); };
}

}  // namespace

BOOST_AUTO_TEST_SUITE(latch_suite)

BOOST_AUTO_TEST_CASE(a_waiter_process_wakes_exactly_at_the_last_count_down)
{
    redis_server srv;
    dlock::test::latch::a_waiter_wakes_exactly_at_the_last_count_down(std::to_string(srv.port()), state_in(srv),
                                                                      watching(srv));
}

BOOST_AUTO_TEST_CASE(concurrent_processes_each_count_once)
{
    redis_server srv;
    dlock::test::latch::concurrent_processes_each_count_once(std::to_string(srv.port()), state_in(srv), watching(srv));
    // Both keys carry the latch's expiry (the default: one day).
    asio::io_context io;
    dlock::redis_store st(io.get_executor(), srv.config());
    auto ttl = std::stoll(srv.cli({"PTTL", st.latch_key("dlock:many")}));
    BOOST_TEST(ttl > 23 * 3600 * 1000LL);
    BOOST_TEST(ttl <= 24 * 3600 * 1000LL);
    BOOST_TEST(std::stoll(srv.cli({"PTTL", st.latch_members_key("dlock:many")})) > 0);
    BOOST_TEST(srv.cli({"HGET", st.latch_key("dlock:many"), "done"}) == "1");
}

BOOST_AUTO_TEST_CASE(a_count_down_whose_reply_is_lost_is_retried_and_counts_once)
{
    redis_server srv;
    dlock::test::tcp_proxy proxy(srv.port());
    asio::io_context io;
    auto cfg = srv.config();
    cfg.port = proxy.port();
    dlock::redis_store st(io.get_executor(), cfg);
    dlock::registry reg(st);
    std::atomic<bool> armed{false};
    std::atomic<std::size_t> drops{0};
    // Once armed, the next EVAL reaches the server, and the connection dies before the
    // reply gets back (replies are held back meanwhile).
    // (Called on the proxy's thread, which drop_connections() needs free: do it from ours.)
    proxy.on_eval_forwarded([&] {
        if (armed.exchange(false))
            asio::post(io, [&] { drops += proxy.drop_connections(); });
    });
    spawn(io, [&]() -> asio::awaitable<void> {
        // Load the script first, so the one EVAL that is cut off is the count-down itself.
        dlock::latch warm(reg, "warm", 2);
        co_await warm.count_down(asio::use_awaitable);
        dlock::latch l(reg, "lost", 3);
        auto before = proxy.evals_forwarded();
        proxy.delay_replies(5s);
        armed = true;
        auto left = co_await l.count_down(asio::use_awaitable);
        BOOST_TEST(drops.load() >= 1u);
        BOOST_TEST(proxy.evals_forwarded() >= before + 2);  // sent, and sent again
        BOOST_TEST(left == 2u);
        proxy.pass_through();
        BOOST_TEST(co_await l.count(asio::use_awaitable) == 2u);
        st.close();
    });
    io.run_for(40s);
    BOOST_TEST(srv.cli({"SCARD", st.latch_members_key("dlock:lost")}) == "1");
}

BOOST_AUTO_TEST_CASE(a_cancelled_or_timed_out_wait_leaves_no_subscription)
{
    redis_server srv;
    asio::io_context io;
    dlock::redis_store st(io.get_executor(), srv.config());
    dlock::registry reg(st);
    const auto channel = st.channel("dlock:c");
    bool ran = false;
    spawn(io, [&]() -> asio::awaitable<void> {
        dlock::latch l(reg, "c", 2);
        for (auto type :
             {asio::cancellation_type::terminal, asio::cancellation_type::partial, asio::cancellation_type::total}) {
            asio::cancellation_signal sig;
            std::optional<error_code> result;
            l.wait(asio::bind_cancellation_slot(sig.slot(), [&](error_code ec) { result = ec; }));
            BOOST_TEST(co_await eventually([&] { return st.subscriber().is_subscribed(channel); }));
            BOOST_TEST(numsub(srv, channel) == 1);
            sig.emit(type);
            BOOST_TEST(co_await eventually([&] { return result.has_value(); }));
            BOOST_TEST((result && *result == asio::error::operation_aborted));
            BOOST_TEST(co_await eventually([&] { return numsub(srv, channel) == 0; }));
        }
        auto [ec] = co_await l.wait_for(50ms, use_tuple);
        BOOST_TEST(ec == dlock::error::timeout);
        BOOST_TEST(co_await eventually([&] { return numsub(srv, channel) == 0; }));
        BOOST_TEST(st.subscriber().channel_count() == 0u);
        ran = true;
        st.close();
    });
    io.run_for(30s);
    BOOST_TEST(ran);
}

BOOST_AUTO_TEST_CASE(a_count_mismatch_across_processes_is_refused)
{
    redis_server srv;
    dlock::test::latch::a_count_mismatch_across_processes_is_refused(std::to_string(srv.port()), state_in(srv));
}

BOOST_AUTO_TEST_CASE(other_stores_answer_not_supported)
{
    redis_server srv;
    asio::io_context io;
    dlock::redis::config seed = srv.config();
    // A redlock_store (nothing is sent: the answer comes before any connection), and
    // redis_store without scripting. (cluster_store keeps latches: cluster_test.cpp.)
    dlock::redlock_store redlock(io.get_executor(), std::vector<dlock::redis::config>{seed});
    dlock::redis_store noscript(io.get_executor(), srv.config(), dlock::redis_store_options{.scripting = false});
    dlock::registry rc(redlock), rn(noscript);
    bool ran = false;
    spawn(io, [&]() -> asio::awaitable<void> {
        for (auto* reg : {&rc, &rn}) {
            dlock::latch l(*reg, "x", 2);
            auto [ec, n] = co_await l.count_down(use_tuple);
            BOOST_TEST(ec == dlock::error::not_supported);
            auto [ec2] = co_await l.wait(use_tuple);
            BOOST_TEST(ec2 == dlock::error::not_supported);
            auto [ec3, m] = co_await l.count(use_tuple);
            BOOST_TEST(ec3 == dlock::error::not_supported);
        }
        ran = true;
        redlock.close();
        noscript.close();
    });
    io.run_for(10s);
    BOOST_TEST(ran);
}

BOOST_AUTO_TEST_SUITE_END()
