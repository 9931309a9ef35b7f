// SPDX-License-Identifier: BSL-1.0
// The lock through a fault proxy (test/common/tcp_proxy): replies the server sends late.
#include <dlock/dlock.hpp>
#include <dlock/redis/store.hpp>

#include "common/redis_server.hpp"
#include "common/tcp_proxy.hpp"
#include "integration/support.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/test/unit_test.hpp>

#include <utility>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;
using boost::system::error_code;
using dlock::test::redis_server;
using dlock::test::run_test;
using dlock::test::tcp_proxy;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

std::string lock_count(const redis_server& srv)
{
    return srv.cli({"EVAL", "return #redis.call('KEYS', '*:lock:*')", "0"});
}

}  // namespace

BOOST_AUTO_TEST_SUITE(proxy)

// Issue "a cancelled acquire keeps the lock", in the library: the attempt has taken the
// lock at the server when the acquire is cancelled, and drain() sees the lease given back.
BOOST_AUTO_TEST_CASE(a_cancelled_acquire_in_flight_is_released_before_drain_completes)
{
    redis_server srv;
    tcp_proxy proxy(srv.port());
    asio::io_context io;
    auto cfg = srv.config();
    cfg.port = proxy.port();
    cfg.connect_timeout = 20s;  // every handshake reply is late too
    dlock::redis_store st(io.get_executor(), cfg);
    dlock::registry reg(st, {.lease = 30s});
    asio::cancellation_signal cancel;
    bool fired = false, key_seen = false;
    // Cancel on the client's thread once the first EVAL (the attempt; the release is the
    // second) has reached the server and taken the lock.
    proxy.on_eval_forwarded([&] {
        asio::post(io, [&] {
            if (std::exchange(fired, true))
                return;
            // Redis runs the EVAL moments after it arrives; its reply then waits in the proxy.
            auto deadline = std::chrono::steady_clock::now() + 1s;
            while (!(key_seen = lock_count(srv) == "1") && std::chrono::steady_clock::now() < deadline) {
            }
            cancel.emit(asio::cancellation_type::terminal);
        });
    });
    proxy.delay_replies(1500ms);
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto [ec, g] = co_await reg.obtain("x").acquire(asio::bind_cancellation_slot(cancel.slot(), use_tuple));
            BOOST_TEST(ec == asio::error::operation_aborted, ec.message());
            BOOST_TEST(!g);
            BOOST_TEST(key_seen, "the attempt had not taken the lock at the server");
            asio::steady_timer bound(co_await asio::this_coro::executor, 5s);
            auto which = co_await (reg.async_drain(use_tuple) || bound.async_wait(use_tuple));
            BOOST_TEST(which.index() == 0u, "drain did not complete within 5 s");
            BOOST_TEST(reg.in_flight() == 0u);
            st.close();
        },
        30s);
    proxy.on_eval_forwarded(nullptr);
    BOOST_TEST(srv.cli({"EXISTS", st.lock_key("dlock:x")}) == "0");
    BOOST_TEST(lock_count(srv) == "0");
}

BOOST_AUTO_TEST_SUITE_END()
