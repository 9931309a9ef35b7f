// SPDX-License-Identifier: BSL-1.0
// memcached_store against real memcached processes: the lock across processes, a restart
// (locks and fencing counters gone, and the holder told), several servers, bad input.
#include <dlock/dlock.hpp>
#include <dlock/memcached.hpp>

#include "common/child.hpp"
#include "common/memcached_server.hpp"
#include "common/redis_server.hpp"
#include "common/scratch_dir.hpp"
#include "integration/mutual_exclusion.hpp"
#include "integration/support.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/test/unit_test.hpp>

#include <stdlib.h>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using dlock::test::memcached_server;
using dlock::test::run_test;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

}  // namespace

BOOST_AUTO_TEST_SUITE(memcached)

BOOST_AUTO_TEST_CASE(traits_say_what_memcached_cannot_do)
{
    asio::io_context io;
    dlock::memcached_store st(io.get_executor(), {});
    auto t = st.traits();
    BOOST_TEST(!t.direct_handoff);
    BOOST_TEST(!t.release_notifications);
    BOOST_TEST(!t.durable_fencing);
    BOOST_TEST(t.ttl_granularity == 1000ms);
    BOOST_TEST(t.min_ttl == 2000ms);
    BOOST_TEST(st.describe() == "memcached memcached://127.0.0.1:11211 ns=dlock");
}

// The multi-process test of every store. Without notifications a waiting process sleeps
// until the holder's remaining lease: hence fewer sections than on Redis.
BOOST_AUTO_TEST_CASE(mutual_exclusion_across_processes)
{
    memcached_server srv;
    const std::string dir = dlock::test::scratch_dir("dlock-mc");
    dlock::test::run_count_workers(srv.url(), "mx", 4, 10, 10, dir, 150s);
}

// A restart loses every lock and the fencing counters: the holder finds out at its next
// renewal (lost), and tokens start again (not durable, as traits() says).
BOOST_AUTO_TEST_CASE(a_restart_loses_the_lock_and_the_holder_is_told)
{
    memcached_server srv;
    asio::io_context io;
    dlock::memcached_store st(io.get_executor(), srv.config());
    dlock::memcached_store other(io.get_executor(), srv.config());
    dlock::registry reg(st, {.lease = 3s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            co_await st.async_connect(asio::use_awaitable);
            for (int i = 0; i < 3; ++i) {  // push the counter up
                auto r = co_await other.async_try_acquire("dlock:job", "warm", 2s, asio::use_awaitable);
                BOOST_TEST(r.acquired);
                BOOST_TEST((co_await other.async_release("dlock:job", "warm", asio::use_awaitable)));
            }
            auto g = co_await reg.obtain("job").acquire();
            BOOST_TEST(g.fencing_token() == 4u);
            srv.restart();
            // The watchdog renews every second: that renewal finds nothing, the lease is lost.
            boost::system::error_code ec;
            asio::steady_timer bound(io, 5s);
            co_await bound.async_wait(
                asio::bind_cancellation_slot(g.lost_slot(), asio::redirect_error(asio::use_awaitable, ec)));
            BOOST_TEST(g.is_lost());
            auto [rec] = co_await g.release(use_tuple);
            BOOST_TEST(rec == dlock::error::lock_lost);
            auto r = co_await other.async_try_acquire("dlock:job", "after", 2s, asio::use_awaitable);
            BOOST_TEST(r.acquired);
            BOOST_TEST(r.fencing_token == 1u);  // the counter restarted
            st.close();
            other.close();
        },
        20s);
}

// Names with spaces or UTF-8 go base64 on the wire; a key beyond memcached's 250 bytes is
// refused; several servers each hold their own names.
BOOST_AUTO_TEST_CASE(names_and_several_servers)
{
    memcached_server a, b;
    asio::io_context io;
    dlock::memcached::config cfg;
    cfg.servers = {{"127.0.0.1", a.port()}, {"127.0.0.1", b.port()}};
    dlock::memcached_store st(io.get_executor(), cfg);
    dlock::memcached::config only_a = a.config();
    dlock::memcached_store sa(io.get_executor(), only_a);
    run_test(io, [&]() -> asio::awaitable<void> {
        auto [cec] = co_await st.async_connect(use_tuple);
        BOOST_TEST(!cec);
        std::size_t on[2] = {0, 0};
        for (int i = 0; i < 40; ++i) {
            std::string name = "name " + std::to_string(i) + " \xc3\xa9";
            BOOST_TEST(st.server_of(name) == st.server_of(name));
            ++on[st.server_of(name)];
            auto r = co_await st.async_try_acquire(name, "t", 2s, asio::use_awaitable);
            BOOST_TEST(r.acquired, name);
            auto s = co_await st.async_status(name, asio::use_awaitable);
            BOOST_TEST(s.holder == "t");
            // What a store on server a alone sees: the name if it hashed there, else nothing.
            auto sa_status = co_await sa.async_status(name, asio::use_awaitable);
            BOOST_TEST(sa_status.held == (st.server_of(name) == 0));
        }
        BOOST_TEST(on[0] > 5u);
        BOOST_TEST(on[1] > 5u);
        auto [ec, r] = co_await st.async_try_acquire(std::string(300, 'x'), "t", 2s, use_tuple);
        BOOST_TEST(ec == dlock::error::invalid_name);
        st.close();
        sa.close();
    });
}

BOOST_AUTO_TEST_CASE(bad_input)
{
    asio::io_context io;
    memcached_server srv;
    dlock::test::redis_server redis;
    dlock::memcached_store st(io.get_executor(), srv.config());
    // Nobody listens there.
    dlock::memcached::config nowhere;
    nowhere.servers = {{"127.0.0.1", dlock::test::free_port()}};
    dlock::memcached_store down(io.get_executor(), nowhere);
    // A Redis server is not memcached.
    dlock::memcached::config wrong;
    wrong.servers = {{"127.0.0.1", redis.port()}};
    dlock::memcached_store not_mc(io.get_executor(), wrong);
    run_test(io, [&]() -> asio::awaitable<void> {
        auto [ec1] = co_await down.async_connect(use_tuple);
        BOOST_TEST(ec1 == dlock::error::connect_failed, ec1.message());
        BOOST_TEST(dlock::is_transient(ec1));
        auto [ec2] = co_await not_mc.async_connect(use_tuple);
        BOOST_TEST(ec2 == dlock::error::protocol_error, ec2.message());
        // Leases memcached cannot keep: refused before sending, and by the registry.
        auto [ec3, r3] = co_await st.async_try_acquire("x", "t", 1500ms, use_tuple);
        BOOST_TEST(ec3 == dlock::error::invalid_lease);
        auto [ec4, r4] = co_await st.async_renew("x", "t", 1s, use_tuple);
        BOOST_TEST(ec4 == dlock::error::invalid_lease);
        dlock::registry subsecond(st, {.lease = 2500ms});
        auto [ec5, g5] = co_await subsecond.obtain("x").acquire(use_tuple);
        BOOST_TEST(ec5 == dlock::error::invalid_lease);
        down.close();
        not_mc.close();
        st.close();
    });
}

BOOST_AUTO_TEST_SUITE_END()
