// SPDX-License-Identifier: BSL-1.0
// A Redis restart (with AOF) while a lock is held: the lease comes back with the data, so
// the holder's release succeeds and no lock_lost is reported while its deadline is ahead.
#include <dlock/dlock.hpp>

#include "common/redis_server.hpp"
#include "integration/support.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/test/unit_test.hpp>

#include <future>
#include <thread>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using dlock::test::redis_server;
using dlock::test::run_test;

namespace {
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
}

BOOST_AUTO_TEST_SUITE(restart)

BOOST_AUTO_TEST_CASE(release_after_a_restart_with_aof_is_no_loss)
{
    dlock::test::server_options opts;
    opts.appendonly = true;
    opts.extra_args = {"--appendfsync", "always"};
    redis_server srv(opts);
    asio::io_context io;
    dlock::redis_store st(io.get_executor(), srv.config());
    dlock::registry reg(st, {.lease = 10s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto lk = reg.obtain("r");
            auto [ec, g] = co_await lk.acquire(use_tuple);
            BOOST_TEST_REQUIRE(!ec);
            auto fence = g.fencing_token();
            srv.stop();   // SIGTERM: the AOF has the lease
            srv.start();  // same port and directory; returns once ready
            BOOST_TEST((std::chrono::steady_clock::now() < g.valid_until()));
            BOOST_TEST(!g.is_lost());
            auto [rec] = co_await g.release(use_tuple);
            BOOST_TEST(!rec, rec.message());
            BOOST_TEST(reg.stats().lost == 0u);
            // The counter survived too: the next lease's fencing token is higher.
            auto [ec2, g2] = co_await lk.acquire(use_tuple);
            BOOST_TEST(!ec2);
            BOOST_TEST(g2.fencing_token() > fence);
            co_await g2.release(use_tuple);
            st.close();
        },
        30s);
}

// The release meets a dead server, then one still loading its data (-LOADING): it is asked
// again until the server answers, and the lease, restored with the data, is ours.
BOOST_AUTO_TEST_CASE(a_release_during_a_restart_and_reload_is_retried)
{
    dlock::test::server_options opts;
    opts.extra_args = {"--enable-debug-command", "yes"};
    redis_server srv(opts);
    srv.cli({"DEBUG", "POPULATE", "3000000"});  // enough data for a reload to take a while
    asio::io_context io;
    dlock::redis_store st(io.get_executor(), srv.config());
    dlock::registry reg(st, {.lease = 30s});
    std::promise<void> test_over;
    std::thread restarter;
    struct join_at_exit {  // even when a check throws
        std::promise<void>& over;
        std::thread& t;
        ~join_at_exit()
        {
            if (t.joinable()) {
                over.set_value();
                t.join();
            }
        }
    } joiner{test_over, restarter};
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto [ec, g] = co_await reg.obtain("r").acquire(use_tuple);
            BOOST_TEST_REQUIRE(!ec);
            srv.cli({"SAVE"});  // the lease is in the snapshot the restart loads
            srv.kill();
            // Restarted from another thread so that this one can meet the reload. That thread
            // lives until the end: the server gets PDEATHSIG when its forking thread exits.
            restarter = std::thread([&] {
                srv.start();
                test_over.get_future().wait();
            });
            auto [rec] = co_await g.release(use_tuple);
            BOOST_TEST(!rec, rec.message());
            BOOST_TEST(reg.stats().store_errors >= 1u);  // it did meet the outage
            BOOST_TEST(reg.stats().lost == 0u);
            st.close();
        },
        60s);
    BOOST_TEST(srv.cli({"EXISTS", st.lock_key("dlock:r")}) == "0");
}

BOOST_AUTO_TEST_SUITE_END()
