// SPDX-License-Identifier: BSL-1.0
// Errors that stop: a server refusal (an ACL without EVAL, a key of another type, a lease
// Redis cannot set) comes back from every Redis store as its own permanent code, with the
// server's text kept on the store.
#include <dlock/dlock.hpp>
#include <dlock/redis/redlock_store.hpp>
#include <dlock/redis/store.hpp>

#include "common/redis_server.hpp"
#include "integration/support.hpp"

#include <boost/algorithm/string/case_conv.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/test/unit_test.hpp>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using dlock::test::redis_server;
using dlock::test::run_test;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// A user that may run everything but scripts.
dlock::redis::config limited_user(const redis_server& srv)
{
    srv.cli({"ACL", "SETUSER", "limited", "on", ">pw", "~*", "&*", "+@all", "-eval", "-evalsha", "-script"});
    auto cfg = srv.config();
    cfg.username = "limited";
    cfg.password = "pw";
    return cfg;
}

bool mentions_eval(const std::string& text)
{
    auto lower = boost::algorithm::to_lower_copy(text);
    return lower.find("eval") != std::string::npos || lower.find("noperm") != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(store_errors)

BOOST_AUTO_TEST_CASE(no_eval_permission_is_permission_denied)
{
    redis_server srv;
    asio::io_context io;
    dlock::redis_store st(io.get_executor(), limited_user(srv));
    run_test(io, [&]() -> asio::awaitable<void> {
        auto [ec, r] = co_await st.async_try_acquire("x", "t1", 5s, use_tuple);
        BOOST_TEST(ec == dlock::error::permission_denied);
        BOOST_TEST(!dlock::is_transient(ec));
        BOOST_TEST(!r.acquired);
        BOOST_TEST(mentions_eval(st.last_error_text()), st.last_error_text());
        auto [ec2, rr] = co_await st.async_renew("x", "t1", 5s, use_tuple);
        BOOST_TEST(ec2 == dlock::error::permission_denied);
        st.close();
    });
}

BOOST_AUTO_TEST_CASE(redlock_reports_the_permanent_error_not_no_quorum)
{
    redis_server srv;
    asio::io_context io;
    dlock::redlock_store st(io.get_executor(), {limited_user(srv)});
    run_test(io, [&]() -> asio::awaitable<void> {
        auto [ec, r] = co_await st.async_try_acquire("x", "t1", 5s, use_tuple);
        BOOST_TEST(ec == dlock::error::permission_denied);
        BOOST_TEST(mentions_eval(st.last_error_text()), st.last_error_text());
        st.close();
    });
}

BOOST_AUTO_TEST_CASE(a_lock_key_of_another_type_is_wrong_type)
{
    redis_server srv;
    asio::io_context io;
    dlock::redis_store st(io.get_executor(), srv.config());
    srv.cli({"LPUSH", st.lock_key("x"), "x"});
    run_test(io, [&]() -> asio::awaitable<void> {
        auto [ec, r] = co_await st.async_try_acquire("x", "t1", 5s, use_tuple);
        BOOST_TEST(ec == dlock::error::wrong_type);
        BOOST_TEST(!dlock::is_transient(ec));
        BOOST_TEST(st.last_error_text().find("WRONGTYPE") != std::string::npos, st.last_error_text());
        st.close();
    });
}

BOOST_AUTO_TEST_CASE(a_huge_lease_is_refused_before_sending)
{
    redis_server srv;
    asio::io_context io;
    dlock::redis_store st(io.get_executor(), srv.config());
    run_test(io, [&]() -> asio::awaitable<void> {
        auto sent = st.connection().stats().requests;
        auto [ec, r] = co_await st.async_try_acquire("x", "t1", std::chrono::milliseconds::max() / 2, use_tuple);
        BOOST_TEST(ec == dlock::error::invalid_lease);
        BOOST_TEST(st.connection().stats().requests == sent);
        auto [ec2, rr] = co_await st.async_renew("x", "t1", std::chrono::milliseconds::max() / 2, use_tuple);
        BOOST_TEST(ec2 == dlock::error::invalid_lease);
        // The bound itself is accepted by Redis.
        auto [ec3, ok] = co_await st.async_try_acquire("x", "t1", st.traits().max_ttl, use_tuple);
        BOOST_TEST(!ec3);
        BOOST_TEST(ok.acquired);
        st.close();
    });
}

// Through the registry: the refusal fails acquire() at once instead of retrying forever,
// and the lock's diagnostics name the refused command.
BOOST_AUTO_TEST_CASE(acquire_stops_at_permission_denied)
{
    redis_server srv;
    asio::io_context io;
    dlock::redis_store st(io.get_executor(), limited_user(srv));
    dlock::registry reg(st);
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto lk = reg.obtain("x");
            auto [ec, g] = co_await lk.acquire(use_tuple);
            BOOST_TEST(ec == dlock::error::permission_denied);
            BOOST_TEST(mentions_eval(st.last_error_text()), st.last_error_text());
            BOOST_TEST(mentions_eval(lk.diagnostics()), lk.diagnostics());
            st.close();
        },
        3s);
}

BOOST_AUTO_TEST_CASE(acquire_stops_at_wrong_type)
{
    redis_server srv;
    asio::io_context io;
    dlock::redis_store st(io.get_executor(), srv.config());
    dlock::registry reg(st);
    srv.cli({"LPUSH", st.lock_key("dlock:x"), "x"});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto [ec, g] = co_await reg.obtain("x").acquire(use_tuple);
            BOOST_TEST(ec == dlock::error::wrong_type);
            st.close();
        },
        3s);
}

BOOST_AUTO_TEST_SUITE_END()
