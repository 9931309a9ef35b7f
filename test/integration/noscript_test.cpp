// SPDX-License-Identifier: BSL-1.0
// redis_store without Lua: a user without @scripting gets a clear error in the default
// mode and a working lock in the no-scripting mode, across processes too; both modes
// share the same keys; a transaction's write never goes out on a newer connection.
#include <dlock/dlock.hpp>
#include <dlock/redis/store.hpp>

#include "common/child.hpp"
#include "common/redis_server.hpp"
#include "common/scratch_dir.hpp"
#include "integration/mutual_exclusion.hpp"
#include "integration/support.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/detached.hpp>
#include <boost/test/unit_test.hpp>

#include <stdlib.h>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using dlock::test::redis_server;
using dlock::test::run_test;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// A user that may do everything but run scripts (as on managed services without EVAL).
dlock::redis::config noscript_user(const redis_server& srv)
{
    srv.cli({"ACL", "SETUSER", "noscript", "on", ">pw", "~*", "&*", "+@all", "-@scripting"});
    auto cfg = srv.config();
    cfg.username = "noscript";
    cfg.password = "pw";
    return cfg;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(redis_noscript)

// The default mode finds out at connect time, and the error names the way out.
BOOST_AUTO_TEST_CASE(scripts_refused_at_connect_name_the_option)
{
    redis_server srv;
    asio::io_context io;
    dlock::redis_store st(io.get_executor(), noscript_user(srv));
    run_test(io, [&]() -> asio::awaitable<void> {
        auto [ec] = co_await st.async_connect(use_tuple);
        BOOST_TEST(ec == dlock::error::permission_denied);
        // The way out is Redis's: in the store's diagnostics, not in the shared message.
        BOOST_TEST(st.last_error_text().find("scripting = false") != std::string::npos, st.last_error_text());
        BOOST_TEST(st.last_error_text().find("--no-scripting") != std::string::npos, st.last_error_text());
        BOOST_TEST(st.last_error_text().find("NOPERM") != std::string::npos, st.last_error_text());
        st.close();
    });
}

// Without async_connect the first acquire stops with the same error (not retried forever).
BOOST_AUTO_TEST_CASE(scripts_refused_at_first_acquire)
{
    redis_server srv;
    asio::io_context io;
    dlock::redis_store st(io.get_executor(), noscript_user(srv));
    dlock::registry reg(st);
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto lk = reg.obtain("x");
            auto [ec, g] = co_await lk.acquire(use_tuple);
            BOOST_TEST(ec == dlock::error::permission_denied);
            BOOST_TEST(lk.diagnostics().find("NOPERM") != std::string::npos, lk.diagnostics());
            BOOST_TEST(lk.diagnostics().find("--no-scripting") != std::string::npos, lk.diagnostics());
            st.close();
        },
        5s);
}

// The same user in the no-scripting mode: connect, lock, renew, release; no hand-off.
BOOST_AUTO_TEST_CASE(no_scripting_mode_locks_for_that_user)
{
    redis_server srv;
    asio::io_context io;
    dlock::redis_store st(io.get_executor(), noscript_user(srv), dlock::redis_store_options{.scripting = false});
    BOOST_TEST(!st.traits().direct_handoff);
    BOOST_TEST(st.describe().find("scripting=off") != std::string::npos);
    dlock::registry reg(st, {.lease = 10s});
    run_test(io, [&]() -> asio::awaitable<void> {
        auto [ec] = co_await st.async_connect(use_tuple);
        BOOST_TEST(!ec, ec.message());
        auto lk = reg.obtain("y");
        auto g = co_await lk.acquire();
        BOOST_TEST(g.fencing_token() > 0u);
        // A second owner through another registry waits for the release (pub/sub wakes it).
        dlock::registry other(st, {.lease = 10s});
        auto t0 = std::chrono::steady_clock::now();
        std::uint64_t token2 = 0;
        dlock::test::notifier got(io.get_executor());
        asio::co_spawn(
            io,
            [&]() -> asio::awaitable<void> {
                auto g2 = co_await other.obtain("y").acquire();
                token2 = g2.fencing_token();
                co_await g2.release();
                got.notify();
            },
            asio::detached);
        // The second owner subscribed (it waits on the release channel), then the release.
        dlock::redis::request numsub;
        numsub.push("PUBSUB", "NUMSUB", st.channel("dlock:y"));
        asio::steady_timer t(io);
        bool subscribed = false;
        for (int i = 0; i < 1000 && !subscribed; ++i) {
            auto r = co_await st.connection().async_exec(numsub, asio::use_awaitable);
            subscribed = r.size() == 1 && r[0].elements.size() == 2 && r[0].elements[1].integer > 0;
            t.expires_after(2ms);
            co_await t.async_wait(asio::use_awaitable);
        }
        BOOST_REQUIRE(subscribed);
        co_await g.release();
        BOOST_REQUIRE(co_await got.wait([&] { return token2 != 0; }, 5000ms));
        BOOST_TEST(token2 > g.fencing_token());
        // Woken by the release, not by the 10 s lease running out.
        BOOST_TEST((std::chrono::steady_clock::now() - t0) < 3s);
        st.close();
    });
}

// Both modes use the same keys: a Lua store and a no-scripting store exclude each other.
BOOST_AUTO_TEST_CASE(both_modes_share_the_keys)
{
    redis_server srv;
    asio::io_context io;
    dlock::redis_store lua(io.get_executor(), srv.config());
    dlock::redis_store tx(io.get_executor(), srv.config(), dlock::redis_store_options{.scripting = false});
    BOOST_TEST(lua.lock_key("n") == tx.lock_key("n"));
    run_test(io, [&]() -> asio::awaitable<void> {
        auto a = co_await lua.async_try_acquire("n", "lua-1", 5s, asio::use_awaitable);
        BOOST_TEST(a.acquired);
        auto b = co_await tx.async_try_acquire("n", "tx-1", 5s, asio::use_awaitable);
        BOOST_TEST(!b.acquired);
        BOOST_TEST(b.holder_ttl.count() > 4000);
        BOOST_TEST((co_await lua.async_renew("n", "lua-1", 5s, asio::use_awaitable)).contended);
        BOOST_TEST((co_await lua.async_release("n", "lua-1", asio::use_awaitable)));
        auto c = co_await tx.async_try_acquire("n", "tx-1", 5s, asio::use_awaitable);
        BOOST_TEST(c.acquired);
        BOOST_TEST(c.fencing_token == a.fencing_token + 1);  // one counter for both
        BOOST_TEST(!(co_await lua.async_try_acquire("n", "lua-2", 5s, asio::use_awaitable)).acquired);
        auto s = co_await lua.async_status("n", asio::use_awaitable);
        BOOST_TEST(s.holder == "tx-1");
        BOOST_TEST(s.fencing_token == c.fencing_token);
        BOOST_TEST((co_await tx.async_release("n", "tx-1", asio::use_awaitable)));
        lua.close();
        tx.close();
    });
}

// Many stores fight over one name at once: WATCH conflicts are retried, and exactly one
// owner holds it at a time (each acquire is checked against the store's own view). An
// attempt that loses 32 rounds in a row says server_busy (transient: the lock retries it
// with backoff); on a loaded machine that happens (a clean-clone CI run saw 20 of 320), so
// only other errors fail the test.
BOOST_AUTO_TEST_CASE(conflicts_are_retried)
{
    redis_server srv;
    asio::io_context io;
    std::vector<std::unique_ptr<dlock::redis_store>> stores;
    for (int i = 0; i < 8; ++i)
        stores.push_back(std::make_unique<dlock::redis_store>(io.get_executor(), srv.config(),
                                                              dlock::redis_store_options{.scripting = false}));
    int holders = 0, max_holders = 0, acquired = 0, errors = 0, busy = 0;
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto ex = co_await asio::this_coro::executor;
            int finished = 0;
            dlock::test::notifier done(ex);
            for (int i = 0; i < 8; ++i)
                asio::co_spawn(
                    ex,
                    [&, i]() -> asio::awaitable<void> {
                        auto& st = *stores[i];
                        std::string token = "t" + std::to_string(i);
                        for (int n = 0; n < 40; ++n) {
                            auto [ec, r] = co_await st.async_try_acquire("hot", token, 5s, use_tuple);
                            if (ec == dlock::error::server_busy)
                                ++busy;
                            else if (ec)
                                ++errors;
                            if (!r.acquired)
                                continue;
                            ++acquired;
                            max_holders = std::max(max_holders, ++holders);
                            co_await asio::post(ex, asio::use_awaitable);
                            --holders;
                            auto [rec, ok] = co_await st.async_release("hot", token, use_tuple);
                            BOOST_TEST((!rec && ok));
                        }
                        ++finished;
                        done.notify();
                    },
                    asio::detached);
            BOOST_REQUIRE(co_await done.wait([&] { return finished == 8; }, 20000ms));
            for (auto& s : stores)
                s->close();
        },
        30s);
    BOOST_TEST(errors == 0);
    BOOST_TEST(busy < 320, "every attempt lost its WATCH rounds");
    BOOST_TEST(max_holders == 1);
    BOOST_TEST(acquired > 8);
}

// The transaction's guard: a request pinned to a connection that has since dropped is
// refused instead of being written (unwatched) on the next one.
BOOST_AUTO_TEST_CASE(pinned_request_never_outlives_its_connection)
{
    redis_server srv;
    asio::io_context io;
    dlock::redis::connection conn(io.get_executor(), srv.config());
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            co_await conn.async_connect(asio::use_awaitable);
            auto gen = conn.generation();
            dlock::redis::request ping;
            ping.push("PING");
            auto [ec, r] = co_await conn.async_exec_pinned(ping, gen, use_tuple);
            BOOST_TEST(!ec);
            srv.restart();
            // The old connection is gone (or about to be noticed): the pinned request fails.
            auto [ec2, r2] = co_await conn.async_exec_pinned(ping, gen, use_tuple);
            BOOST_TEST(ec2 == dlock::error::connection_lost);
            // A new connection has a new generation; plain requests reconnect as before.
            auto [ec3, r3] = co_await conn.async_exec(ping, use_tuple);
            BOOST_TEST(!ec3);
            BOOST_TEST(conn.generation() != gen);
            auto [ec4, r4] = co_await conn.async_exec_pinned(ping, gen, use_tuple);
            BOOST_TEST(ec4 == dlock::error::connection_lost);
            auto [ec5, r5] = co_await conn.async_exec_pinned(ping, conn.generation(), use_tuple);
            BOOST_TEST(!ec5);
            conn.close();
        },
        20s);
}

// The multi-process test of every store, as the user without @scripting.
BOOST_AUTO_TEST_CASE(mutual_exclusion_across_processes)
{
    redis_server srv;
    srv.cli({"ACL", "SETUSER", "noscript", "on", ">pw", "~*", "&*", "+@all", "-@scripting"});
    const std::string dir = dlock::test::scratch_dir("dlock-noscript");
    std::string url = "noscript:redis://noscript:pw@127.0.0.1:" + std::to_string(srv.port());
    auto r = dlock::test::run_count_workers(url, "mx", 4, 20, 50, dir);
    BOOST_TEST(r.switches > 10u, "process switches: " << r.switches);
    // Nothing ran as a script.
    BOOST_TEST(srv.cli({"INFO", "commandstats"}).find("cmdstat_eval") == std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
