// SPDX-License-Identifier: BSL-1.0
// redis::connection against real redis-server processes: pipelining, failures, timeouts,
// cancellation, scripts and error replies.
#include <dlock/error.hpp>
#include <dlock/redis/connection.hpp>
#include <dlock/redis/script.hpp>

#include "common/redis_server.hpp"
#include "integration/support.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace asio = boost::asio;
using namespace dlock;
using namespace std::chrono_literals;
using boost::system::error_code;
using test::cmd;
using test::exec;

namespace {

// DEBUG is off by default since Redis 7; "local" admits our loopback clients.
test::server_options with_debug()
{
    test::server_options o;
    o.extra_args = {"--enable-debug-command", "local"};
    return o;
}

// Fast reconnects, so tests that restart the server do not wait on backoff.
redis::config fast_reconnect(redis::config c)
{
    c.reconnect_min = 5ms;
    c.reconnect_max = 50ms;
    return c;
}

// The outcome of an async_exec started with a callback.
struct outcome {
    bool done = false;
    error_code ec;
    redis::response resp;
};

void start_exec(redis::connection& conn, const redis::request& req, std::chrono::milliseconds timeout, outcome& out,
                test::notifier& n)
{
    conn.async_exec(req, timeout, [&out, &n](error_code ec, redis::response resp) {
        out = {true, ec, std::move(resp)};
        n.notify();
    });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(connection_suite)

BOOST_AUTO_TEST_CASE(ping_roundtrip)
{
    test::redis_server srv;
    asio::io_context io;
    redis::connection conn(io.get_executor(), srv.config());
    test::run_test(io, [&]() -> asio::awaitable<void> {
        redis::request req;
        req.push("PING");
        req.push("SET", "k", "v");
        req.push("GET", "k");
        auto resp = co_await conn.async_exec(req);
        BOOST_TEST_REQUIRE(resp.size() == 3u);
        BOOST_TEST(resp[0].str == "PONG");
        BOOST_TEST(resp[1].str == "OK");
        BOOST_TEST(resp[2].str == "v");
        BOOST_TEST(conn.is_connected());
        BOOST_TEST(conn.stats().connects == 1u);
        BOOST_TEST(conn.stats().requests == 1u);
        // CLIENT SETNAME ran during the handshake.
        auto name = co_await exec(conn, cmd("CLIENT", "GETNAME"));
        BOOST_TEST(name.resp.at(0).str == "dlock");
    });
}

BOOST_AUTO_TEST_CASE(pipelined_requests_from_many_coroutines)
{
    test::redis_server srv;
    asio::io_context io;
    redis::connection conn(io.get_executor(), srv.config());
    constexpr int coroutines = 100;
    constexpr int per_coroutine = 100;
    int mismatches = 0;
    int completed = 0;
    test::run_test(
        io,
        [&]() -> asio::awaitable<void> {
            BOOST_TEST_REQUIRE(!co_await test::connect(conn));
            auto before = conn.stats();
            auto worker = [&](int id) -> asio::awaitable<void> {
                for (int n = 0; n < per_coroutine; ++n) {
                    std::string value = "value-" + std::to_string(id) + "-" + std::to_string(n);
                    redis::request req;
                    if (n % 2 == 0) {
                        req.push("ECHO", value);
                    } else {
                        std::string key = "key-" + std::to_string(id);
                        req.push("SET", key, value).push("GET", key);
                    }
                    auto r = co_await exec(conn, req);
                    ++completed;
                    if (r.ec || r.resp.size() != req.size() || r.resp.back().str != value)
                        ++mismatches;
                }
            };
            test::task_group group(co_await asio::this_coro::executor);
            for (int id = 0; id < coroutines; ++id)
                group.spawn(worker(id));
            co_await group.join(30s);

            auto requests = conn.stats().requests - before.requests;
            auto batches = conn.stats().batches - before.batches;
            BOOST_TEST_MESSAGE("10000 requests went out in " << batches << " writes");
            BOOST_TEST(requests == 10000u);
            // Pipelining: while a write is on the wire every new request joins the next one
            // (the reader lets a batch out every 16 replies it dispatches: about 10 a write).
            BOOST_TEST(batches < 2000u);
            BOOST_TEST(conn.stats().connects == 1u);
        },
        40s);
    BOOST_TEST(completed == coroutines * per_coroutine);
    BOOST_TEST(mismatches == 0);
}

BOOST_AUTO_TEST_CASE(server_killed_then_restarted)
{
    test::redis_server srv(with_debug());
    asio::io_context io;
    redis::connection conn(io.get_executor(), fast_reconnect(srv.config()));
    test::notifier n(io.get_executor());
    test::run_test(io, [&]() -> asio::awaitable<void> {
        BOOST_TEST_REQUIRE(!co_await test::connect(conn));
        // DEBUG SLEEP holds the server so that everything behind it is on the wire,
        // unanswered, when the server dies.
        std::vector<outcome> inflight(21);
        auto batches = conn.stats().batches;
        start_exec(conn, cmd("DEBUG", "SLEEP", 10), 20s, inflight[0], n);
        for (std::size_t i = 1; i < inflight.size(); ++i)
            start_exec(conn, cmd("ECHO", "in-flight-" + std::to_string(i)), 20s, inflight[i], n);
        BOOST_TEST_REQUIRE(co_await test::yield_until([&] { return conn.stats().batches > batches; }));

        srv.kill();
        auto all_done = [&] {
            return std::all_of(inflight.begin(), inflight.end(), [](const outcome& o) { return o.done; });
        };
        BOOST_TEST_REQUIRE(co_await n.wait(all_done));
        for (auto& o : inflight)
            BOOST_TEST(o.ec == error::connection_lost);
        BOOST_TEST(!conn.is_connected());

        // While the server is down a request waits in the queue until its timeout.
        auto down = co_await exec(conn, cmd("PING"), 200ms);
        BOOST_TEST(down.ec == error::timeout);
        BOOST_TEST(conn.stats().timeouts == 1u);

        // A request made while down goes out once the server is back.
        outcome queued;
        start_exec(conn, cmd("ECHO", "queued-while-down"), 10s, queued, n);
        srv.start();
        BOOST_TEST_REQUIRE(co_await n.wait([&] { return queued.done; }));
        BOOST_TEST(!queued.ec);
        BOOST_TEST(queued.resp.at(0).str == "queued-while-down");

        for (int i = 0; i < 10; ++i) {
            auto r = co_await exec(conn, cmd("ECHO", "after-" + std::to_string(i)));
            BOOST_TEST_REQUIRE(!r.ec);
            BOOST_TEST(r.resp.at(0).str == "after-" + std::to_string(i));
        }
        BOOST_TEST(conn.is_connected());
        BOOST_TEST(conn.stats().connects == 2u);
        BOOST_TEST(conn.stats().connect_failures >= 1u);
    });
}

BOOST_AUTO_TEST_CASE(server_killed_during_traffic)
{
    test::redis_server srv;
    asio::io_context io;
    redis::connection conn(io.get_executor(), fast_reconnect(srv.config()));
    test::notifier progress(io.get_executor());
    int ok = 0, lost = 0, timed_out = 0, ok_after_restart = 0;
    bool restarted = false;
    test::run_test(
        io,
        [&]() -> asio::awaitable<void> {
            BOOST_TEST_REQUIRE(!co_await test::connect(conn));
            auto worker = [&](int id) -> asio::awaitable<void> {
                int mine_after = 0;
                for (int n = 0; mine_after < 50; ++n) {
                    std::string value = std::to_string(id) + ":" + std::to_string(n);
                    auto r = co_await exec(conn, cmd("ECHO", value), 5s);
                    if (!r.ec) {
                        // Every reply still belongs to its own request, across the reconnect.
                        BOOST_TEST_REQUIRE(r.resp.at(0).str == value);
                        ++ok;
                        if (restarted) {
                            ++mine_after;
                            ++ok_after_restart;
                        }
                    } else if (r.ec == error::connection_lost) {
                        ++lost;
                    } else {
                        BOOST_TEST_REQUIRE(r.ec == error::timeout);
                        ++timed_out;
                    }
                    progress.notify();
                }
            };
            test::task_group group(co_await asio::this_coro::executor);
            for (int id = 0; id < 20; ++id)
                group.spawn(worker(id));

            BOOST_TEST_REQUIRE(co_await progress.wait([&] { return ok >= 2000; }));
            srv.kill();
            // Let the connection see the loss before the server comes back.
            BOOST_TEST_REQUIRE(co_await progress.wait([&] { return lost > 0; }));
            srv.start();
            restarted = true;
            co_await group.join(20s);
        },
        30s);
    BOOST_TEST_MESSAGE("ok " << ok << ", connection_lost " << lost << ", timeout " << timed_out);
    BOOST_TEST(lost > 0);
    BOOST_TEST(ok_after_restart == 20 * 50);
    BOOST_TEST(conn.stats().connects == 2u);
}

BOOST_AUTO_TEST_CASE(timeout_behind_slow_command_keeps_sync)
{
    test::redis_server srv(with_debug());
    asio::io_context io;
    redis::connection conn(io.get_executor(), srv.config());
    test::notifier n(io.get_executor());
    test::run_test(io, [&]() -> asio::awaitable<void> {
        BOOST_TEST_REQUIRE(!co_await test::connect(conn));
        outcome sleep;
        start_exec(conn, cmd("DEBUG", "SLEEP", "0.5"), 5s, sleep, n);
        // Pipelined behind DEBUG SLEEP on the same connection: its reply cannot come in time.
        auto t0 = std::chrono::steady_clock::now();
        auto ping = co_await exec(conn, cmd("PING"), 100ms);
        auto waited = std::chrono::steady_clock::now() - t0;
        BOOST_TEST(ping.ec == error::timeout);
        BOOST_TEST(ping.resp.empty());
        BOOST_TEST((waited < 400ms));
        BOOST_TEST(conn.stats().timeouts == 1u);

        // The late PONG is read and dropped: later replies still match their requests.
        outcome a, b, c;
        start_exec(conn, cmd("ECHO", "first"), 5s, a, n);
        start_exec(conn, cmd("ECHO", "second"), 5s, b, n);
        redis::request multi;
        multi.push("SET", "k", "v").push("GET", "k").push("ECHO", "third");
        start_exec(conn, multi, 5s, c, n);
        BOOST_TEST_REQUIRE(co_await n.wait([&] { return sleep.done && a.done && b.done && c.done; }));
        BOOST_TEST(!sleep.ec);
        BOOST_TEST(sleep.resp.at(0).str == "OK");
        BOOST_TEST(a.resp.at(0).str == "first");
        BOOST_TEST(b.resp.at(0).str == "second");
        BOOST_TEST_REQUIRE(c.resp.size() == 3u);
        BOOST_TEST(c.resp[1].str == "v");
        BOOST_TEST(c.resp[2].str == "third");
        BOOST_TEST(conn.stats().connects == 1u);  // a timeout does not reset the connection
    });
}

BOOST_AUTO_TEST_CASE(cancel_queued_request_with_signal)
{
    test::redis_server srv;
    asio::io_context io;
    redis::connection conn(io.get_executor(), srv.config());
    test::notifier n(io.get_executor());
    test::run_test(io, [&]() -> asio::awaitable<void> {
        BOOST_TEST_REQUIRE(!co_await test::connect(conn));
        for (auto type :
             {asio::cancellation_type::terminal, asio::cancellation_type::partial, asio::cancellation_type::total}) {
            BOOST_TEST_CONTEXT("cancellation type " << static_cast<int>(type))
            {
                asio::cancellation_signal sig;
                outcome o;
                // A request goes to the socket at once when no write is in flight; a PING
                // first keeps the writer busy so the INCR has to queue behind it.
                bool pinged = false;
                conn.async_exec(cmd("PING"), [&](error_code, redis::response) {
                    pinged = true;
                    n.notify();
                });
                auto batches = conn.stats().batches;
                conn.async_exec(cmd("INCR", "cancelled-counter"), 5s,
                                asio::bind_cancellation_slot(sig.slot(), [&](error_code ec, redis::response r) {
                                    o = {true, ec, std::move(r)};
                                    n.notify();
                                }));
                // Still queued behind the PING's write. Any type removes it.
                sig.emit(type);
                BOOST_TEST_REQUIRE(co_await n.wait([&] { return o.done; }));
                BOOST_TEST(o.ec == asio::error::operation_aborted);
                BOOST_TEST(conn.stats().batches == batches);
                BOOST_TEST_REQUIRE(co_await n.wait([&] { return pinged; }));
            }
        }
        BOOST_TEST(conn.stats().cancelled == 3u);
        // None of them reached the server, and the connection is in sync.
        auto r = co_await exec(conn, cmd("GET", "cancelled-counter"));
        BOOST_TEST(!r.ec);
        BOOST_TEST(r.resp.at(0).is_nil());
        r = co_await exec(conn, cmd("ECHO", "still-fine"));
        BOOST_TEST(r.resp.at(0).str == "still-fine");
    });
}

BOOST_AUTO_TEST_CASE(cancel_written_request_with_signal)
{
    test::redis_server srv;
    asio::io_context io;
    redis::connection conn(io.get_executor(), srv.config());
    test::notifier n(io.get_executor());
    test::run_test(io, [&]() -> asio::awaitable<void> {
        BOOST_TEST_REQUIRE(!co_await test::connect(conn));
        int round = 0;
        for (auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial}) {
            BOOST_TEST_CONTEXT("cancellation type " << static_cast<int>(type))
            {
                std::string list = "list-" + std::to_string(round++);
                asio::cancellation_signal sig;
                outcome blocked;
                auto batches = conn.stats().batches;
                // BLPOP with no timeout blocks the connection until someone pushes.
                conn.async_exec(cmd("BLPOP", list, 0), 0ms,
                                asio::bind_cancellation_slot(sig.slot(), [&](error_code ec, redis::response r) {
                                    blocked = {true, ec, std::move(r)};
                                    n.notify();
                                }));
                BOOST_TEST_REQUIRE(co_await test::yield_until([&] { return conn.stats().batches > batches; }));
                sig.emit(type);
                // Completes at once, although the server has not answered.
                BOOST_TEST_REQUIRE(co_await n.wait([&] { return blocked.done; }, 1000ms));
                BOOST_TEST(blocked.ec == asio::error::operation_aborted);

                // Queue a request behind the abandoned BLPOP, then unblock it: the BLPOP reply
                // is dropped and the ECHO gets its own.
                outcome after;
                start_exec(conn, cmd("ECHO", "after-" + list), 5s, after, n);
                BOOST_TEST(srv.cli({"LPUSH", list, "x"}) == "1");
                BOOST_TEST_REQUIRE(co_await n.wait([&] { return after.done; }));
                BOOST_TEST(!after.ec);
                BOOST_TEST(after.resp.at(0).str == "after-" + list);
                BOOST_TEST(srv.cli({"LLEN", list}) == "0");  // the abandoned BLPOP did run
            }
        }
        BOOST_TEST(conn.stats().cancelled == 2u);
        BOOST_TEST(conn.stats().connects == 1u);
    });
}

BOOST_AUTO_TEST_CASE(total_cancellation_leaves_written_request_alone)
{
    test::redis_server srv;
    asio::io_context io;
    redis::connection conn(io.get_executor(), srv.config());
    test::notifier n(io.get_executor());
    test::run_test(io, [&]() -> asio::awaitable<void> {
        BOOST_TEST_REQUIRE(!co_await test::connect(conn));
        asio::cancellation_signal sig;
        outcome blocked;
        auto batches = conn.stats().batches;
        conn.async_exec(cmd("BLPOP", "total-list", 0), 0ms,
                        asio::bind_cancellation_slot(sig.slot(), [&](error_code ec, redis::response r) {
                            blocked = {true, ec, std::move(r)};
                            n.notify();
                        }));
        BOOST_TEST_REQUIRE(co_await test::yield_until([&] { return conn.stats().batches > batches; }));
        // Total cancellation promises the operation had no effect: a written command may
        // have, so the request carries on.
        sig.emit(asio::cancellation_type::total);
        BOOST_TEST(srv.cli({"LPUSH", "total-list", "x"}) == "1");
        BOOST_TEST_REQUIRE(co_await n.wait([&] { return blocked.done; }));
        BOOST_TEST(!blocked.ec);
        BOOST_TEST_REQUIRE(blocked.resp.size() == 1u);
        BOOST_TEST_REQUIRE(blocked.resp[0].elements.size() == 2u);
        BOOST_TEST(blocked.resp[0].elements[1].str == "x");
        BOOST_TEST(conn.stats().cancelled == 0u);
    });
}

BOOST_AUTO_TEST_CASE(cancel_with_awaitable_operators)
{
    using namespace asio::experimental::awaitable_operators;
    test::redis_server srv;
    asio::io_context io;
    redis::connection conn(io.get_executor(), srv.config());
    test::notifier n(io.get_executor());
    test::run_test(io, [&]() -> asio::awaitable<void> {
        BOOST_TEST_REQUIRE(!co_await test::connect(conn));
        asio::steady_timer timer(co_await asio::this_coro::executor, 100ms);
        auto t0 = std::chrono::steady_clock::now();
        auto req = cmd("BLPOP", "op-list", 0);
        auto winner = co_await (conn.async_exec(req, asio::use_awaitable) || timer.async_wait(asio::use_awaitable));
        BOOST_TEST(winner.index() == 1u);
        BOOST_TEST((std::chrono::steady_clock::now() - t0 < 2s));
        BOOST_TEST(conn.stats().cancelled == 1u);

        // The same with the exec's error observed.
        error_code exec_ec;
        auto observed = [&]() -> asio::awaitable<void> {
            auto [ec, resp] =
                co_await conn.async_exec(cmd("BLPOP", "op-list-2", 0), asio::as_tuple(asio::use_awaitable));
            exec_ec = ec;
        };
        timer.expires_after(50ms);
        auto second = co_await (observed() || timer.async_wait(asio::use_awaitable));
        BOOST_TEST(second.index() == 1u);
        BOOST_TEST(exec_ec == asio::error::operation_aborted);

        // Both BLPOPs are still blocked on the server; unblock them and check sync.
        outcome after;
        start_exec(conn, cmd("ECHO", "in-sync"), 5s, after, n);
        BOOST_TEST(srv.cli({"LPUSH", "op-list", "x"}) == "1");
        BOOST_TEST(srv.cli({"LPUSH", "op-list-2", "y"}) == "1");
        BOOST_TEST_REQUIRE(co_await n.wait([&] { return after.done; }));
        BOOST_TEST(after.resp.at(0).str == "in-sync");
        BOOST_TEST(conn.stats().cancelled == 2u);

        // And the other way round: the exec completes first, the timer is cancelled.
        timer.expires_after(5s);
        auto quick = co_await (conn.async_exec(cmd("ECHO", "quick"), asio::use_awaitable) ||
                               timer.async_wait(asio::use_awaitable));
        BOOST_TEST_REQUIRE(quick.index() == 0u);
        BOOST_TEST(std::get<0>(quick).at(0).str == "quick");
        BOOST_TEST(conn.stats().cancelled == 2u);
    });
}

BOOST_AUTO_TEST_CASE(server_error_reply)
{
    test::redis_server srv;
    asio::io_context io;
    redis::connection conn(io.get_executor(), srv.config());
    test::run_test(io, [&]() -> asio::awaitable<void> {
        redis::request req;
        req.push("SET", "text", "not-a-number").push("INCR", "text").push("GET", "text");
        auto r = co_await exec(conn, req);
        BOOST_TEST(r.ec == error::server_error);
        // Every reply is there, the server's text kept apart from our error message.
        BOOST_TEST_REQUIRE(r.resp.size() == 3u);
        BOOST_TEST(r.resp[0].str == "OK");
        BOOST_TEST(r.resp[1].is_error());
        BOOST_TEST(r.resp[1].str.find("not an integer") != std::string::npos, r.resp[1].str);
        BOOST_TEST(r.resp[2].str == "not-a-number");
        BOOST_TEST(make_error_code(error::server_error).message().find("not an integer") == std::string::npos);

        r = co_await exec(conn, cmd("NOSUCHCOMMAND", "x"));
        BOOST_TEST(r.ec == error::server_error);
        BOOST_TEST(r.resp.at(0).str.find("unknown command") != std::string::npos, r.resp.at(0).str);

        // With use_awaitable the error arrives as an exception carrying the code.
        try {
            co_await conn.async_exec(cmd("INCR", "text"), asio::use_awaitable);
            BOOST_TEST(false, "expected an exception");
        } catch (const boost::system::system_error& e) {
            BOOST_TEST(e.code() == error::server_error);
        }
        r = co_await exec(conn, cmd("ECHO", "fine"));
        BOOST_TEST(!r.ec);
        BOOST_TEST(r.resp.at(0).str == "fine");
    });
}

BOOST_AUTO_TEST_CASE(a_scripts_first_use_keeps_pipeline_order)
{
    test::redis_server srv;
    asio::io_context io;
    redis::connection conn(io.get_executor(), srv.config());
    test::run_test(io, [&]() -> asio::awaitable<void> {
        co_await conn.async_connect();
        // Sent back to back: the script (never loaded on this server) must run before the
        // GET queued behind it, as an EVALSHA retried after NOSCRIPT would not.
        redis::script set("return redis.call('SET', KEYS[1], ARGV[1])");
        std::vector<std::string> keys = {"ordered"}, args = {"1"};
        conn.async_eval(set, keys, args, [](boost::system::error_code ec, redis::reply) { BOOST_TEST(!ec); });
        redis::request get;
        get.push("GET", "ordered");
        auto r = co_await conn.async_exec(get, asio::use_awaitable);
        BOOST_TEST(r.at(0).str == "1");  // the script ran first
        BOOST_TEST(conn.stats().noscript_reloads == 0u);
    });
}

BOOST_AUTO_TEST_CASE(noscript_recovery)
{
    test::redis_server srv;
    asio::io_context io;
    redis::connection conn(io.get_executor(), srv.config());
    test::run_test(io, [&]() -> asio::awaitable<void> {
        redis::script s("return {KEYS[1], ARGV[1], redis.call('INCR', KEYS[1])}");
        BOOST_TEST(srv.cli({"SCRIPT", "LOAD", s.body()}) == s.sha1());
        std::vector<std::string> keys = {"script-counter"};
        std::vector<std::string> args = {"arg"};

        auto r = co_await conn.async_eval(s, keys, args, asio::use_awaitable);
        BOOST_TEST_REQUIRE(r.elements.size() == 3u);
        BOOST_TEST(r.elements[0].str == "script-counter");
        BOOST_TEST(r.elements[1].str == "arg");
        BOOST_TEST(r.elements[2].integer == 1);
        BOOST_TEST(conn.stats().noscript_reloads == 0u);  // first use on this connection: sent as EVAL

        BOOST_TEST(srv.cli({"SCRIPT", "FLUSH"}) == "OK");
        r = co_await conn.async_eval(s, keys, args, asio::use_awaitable);
        BOOST_TEST_REQUIRE(r.elements.size() == 3u);
        BOOST_TEST(r.elements[2].integer == 2);  // ran exactly once more
        BOOST_TEST(conn.stats().noscript_reloads == 1u);

        // EVAL cached it again: no further reload.
        r = co_await conn.async_eval(s, keys, args, asio::use_awaitable);
        BOOST_TEST(r.elements.at(2).integer == 3);
        BOOST_TEST(conn.stats().noscript_reloads == 1u);

        // A script error is a server error, not a reload.
        redis::script bad("return redis.call('NOSUCHCOMMAND')");
        auto [ec, out] = co_await conn.async_eval(bad, {}, {}, asio::as_tuple(asio::use_awaitable));
        BOOST_TEST(ec == error::server_error);
        BOOST_TEST(out.is_error());
        BOOST_TEST(conn.stats().noscript_reloads == 1u);  // its first use went as EVAL: no miss
    });
}

// A call sent after a PING (script_args::ping_first) answers with the script's reply, and
// after NOSCRIPT goes again as EVAL without the PING.
BOOST_AUTO_TEST_CASE(a_script_call_after_a_ping)
{
    test::redis_server srv;
    asio::io_context io;
    redis::connection conn(io.get_executor(), srv.config());
    test::run_test(io, [&]() -> asio::awaitable<void> {
        redis::script s("return {KEYS[1], ARGV[1], redis.call('INCR', KEYS[1])}");
        BOOST_TEST(srv.cli({"SCRIPT", "LOAD", s.body()}) == s.sha1());
        auto call = [&] {
            redis::script_args a(1);
            a.add("pinged-counter").add("arg").ping_first();
            return conn.async_eval(s, std::move(a), asio::use_awaitable);
        };
        auto r = co_await call();  // the first use: EVAL
        BOOST_TEST_REQUIRE(r.elements.size() == 3u);
        BOOST_TEST(r.elements[0].str == "pinged-counter");
        BOOST_TEST(r.elements[2].integer == 1);
        r = co_await call();  // EVALSHA, after the PING
        BOOST_TEST_REQUIRE(r.elements.size() == 3u);
        BOOST_TEST(r.elements[2].integer == 2);
        BOOST_TEST(conn.stats().noscript_reloads == 0u);
        BOOST_TEST(srv.cli({"SCRIPT", "FLUSH"}) == "OK");
        r = co_await call();  // PONG, NOSCRIPT: again as EVAL, one reply expected
        BOOST_TEST_REQUIRE(r.elements.size() == 3u);
        BOOST_TEST(r.elements[2].integer == 3);  // ran exactly once more
        BOOST_TEST(conn.stats().noscript_reloads == 1u);
        // The connection is in step: a plain request after it gets its own reply.
        redis::request req;
        req.push("ECHO", "after");
        auto after = co_await conn.async_exec(req, asio::use_awaitable);
        BOOST_TEST(after.at(0).str == "after");

        // A user whose ACL refuses PING: the call still runs and answers with its reply.
        srv.cli({"ACL", "SETUSER", "noping", "on", ">pw", "~*", "&*", "+@all", "-ping"});
        auto cfg = srv.config();
        cfg.username = "noping";
        cfg.password = "pw";
        redis::connection limited(io.get_executor(), cfg);
        redis::script_args a(1);
        a.add("pinged-counter").add("arg").ping_first();
        auto [ec, out] = co_await limited.async_eval(s, std::move(a), asio::as_tuple(asio::use_awaitable));
        BOOST_TEST(!ec);
        BOOST_TEST_REQUIRE(out.elements.size() == 3u);
        BOOST_TEST(out.elements[2].integer == 4);
        limited.close();
    });
}

BOOST_AUTO_TEST_CASE(large_values)
{
    test::redis_server srv;
    asio::io_context io;
    redis::connection conn(io.get_executor(), srv.config());
    test::run_test(
        io,
        [&]() -> asio::awaitable<void> {
            std::string big(16u << 20, '\0');
            for (std::size_t i = 0; i < big.size(); ++i)
                big[i] = static_cast<char>(i * 7 % 251);  // binary, with CR, LF and NUL bytes
            redis::request req;
            req.push("SET", "big", big).push("STRLEN", "big").push("GET", "big").push("ECHO", "tail");
            auto r = co_await exec(conn, req, 20s);
            BOOST_TEST_REQUIRE(!r.ec);
            BOOST_TEST_REQUIRE(r.resp.size() == 4u);
            BOOST_TEST(r.resp[1].integer == static_cast<long long>(big.size()));
            BOOST_TEST((r.resp[2].str == big));
            BOOST_TEST(r.resp[3].str == "tail");
        },
        30s);
}

BOOST_AUTO_TEST_CASE(close_fails_pending_requests)
{
    test::redis_server srv;
    asio::io_context io;
    redis::connection conn(io.get_executor(), srv.config());
    test::notifier n(io.get_executor());
    test::run_test(io, [&]() -> asio::awaitable<void> {
        BOOST_TEST_REQUIRE(!co_await test::connect(conn));
        outcome written, queued;
        auto batches = conn.stats().batches;
        start_exec(conn, cmd("BLPOP", "never", 0), 0ms, written, n);
        BOOST_TEST_REQUIRE(co_await test::yield_until([&] { return conn.stats().batches > batches; }));
        start_exec(conn, cmd("PING"), 5s, queued, n);
        conn.close();
        BOOST_TEST_REQUIRE(co_await n.wait([&] { return written.done && queued.done; }));
        BOOST_TEST(written.ec == error::closed);
        BOOST_TEST(queued.ec == error::closed);
        BOOST_TEST(!conn.is_connected());

        auto r = co_await exec(conn, cmd("PING"));
        BOOST_TEST(r.ec == error::closed);
        BOOST_TEST(co_await test::connect(conn) == error::closed);
        conn.close();  // twice is harmless
    });
}

// 64 replies that arrive in one read (the server held them behind DEBUG SLEEP): every
// handler sends a follow-up. The reader lets the follow-ups out every 16 replies, so the
// server has work while the rest are dispatched; replies still match their requests.
BOOST_AUTO_TEST_CASE(a_burst_of_replies_lets_new_requests_out_as_it_goes)
{
    test::redis_server srv(with_debug());
    asio::io_context io;
    redis::connection conn(io.get_executor(), srv.config());
    test::notifier n(io.get_executor());
    test::run_test(io, [&]() -> asio::awaitable<void> {
        BOOST_TEST_REQUIRE(!co_await test::connect(conn));
        constexpr int burst = 64;
        outcome sleep;
        start_exec(conn, cmd("DEBUG", "SLEEP", "0.2"), 5s, sleep, n);
        std::vector<outcome> follow(burst);
        int replies = 0, wrong = 0;
        std::uint64_t writes_at_first = 0, writes_at_last = 0;
        for (int i = 0; i < burst; ++i) {
            conn.async_exec(cmd("ECHO", std::to_string(i)), 5s, [&, i](error_code ec, redis::response r) {
                if (ec || r.size() != 1 || r[0].str != std::to_string(i) || replies != i)
                    ++wrong;
                if (replies == 0)
                    writes_at_first = conn.stats().batches;
                if (++replies == burst)
                    writes_at_last = conn.stats().batches;
                start_exec(conn, cmd("ECHO", "f" + std::to_string(i)), 5s, follow[std::size_t(i)], n);
            });
        }
        BOOST_TEST_REQUIRE(co_await n.wait([&] {
            return sleep.done && std::all_of(follow.begin(), follow.end(), [](const outcome& o) { return o.done; });
        }));
        BOOST_TEST(!sleep.ec);
        BOOST_TEST(replies == burst);
        BOOST_TEST(wrong == 0);
        for (int i = 0; i < burst; ++i) {
            const auto& f = follow[std::size_t(i)];
            BOOST_TEST_REQUIRE(!f.ec);
            BOOST_TEST_REQUIRE(f.resp.size() == 1u);
            BOOST_TEST(f.resp[0].str == "f" + std::to_string(i));
        }
        // The first follow-up goes out at once; without the reader's pauses the other 63
        // would wait for the end of the burst (one write more), with them 3 writes go midway.
        BOOST_TEST_MESSAGE("writes during the burst: " << writes_at_last - writes_at_first);
        BOOST_TEST(writes_at_last - writes_at_first >= 3u);
        BOOST_TEST(conn.stats().connects == 1u);
    });
}

// The same burst where only the replies after the first 20 send follow-ups: the reader
// still pauses for them (it counts replies since its last pause, not only up to 16).
BOOST_AUTO_TEST_CASE(a_burst_pauses_for_requests_made_late_in_it)
{
    test::redis_server srv(with_debug());
    asio::io_context io;
    redis::connection conn(io.get_executor(), srv.config());
    test::notifier n(io.get_executor());
    test::run_test(io, [&]() -> asio::awaitable<void> {
        BOOST_TEST_REQUIRE(!co_await test::connect(conn));
        constexpr int burst = 64, quiet = 20;
        outcome sleep;
        start_exec(conn, cmd("DEBUG", "SLEEP", "0.2"), 5s, sleep, n);
        std::vector<outcome> follow(burst);
        int replies = 0;
        std::uint64_t writes_at_first = 0, writes_at_last = 0;
        for (int i = 0; i < burst; ++i) {
            conn.async_exec(cmd("ECHO", std::to_string(i)), 5s, [&, i](error_code ec, redis::response) {
                BOOST_TEST(!ec);
                if (++replies == quiet + 1)
                    writes_at_first = conn.stats().batches;
                if (replies == burst)
                    writes_at_last = conn.stats().batches;
                if (i >= quiet)
                    start_exec(conn, cmd("ECHO", "f" + std::to_string(i)), 5s, follow[std::size_t(i)], n);
            });
        }
        BOOST_TEST_REQUIRE(co_await n.wait([&] {
            return sleep.done &&
                   std::all_of(follow.begin() + quiet, follow.end(), [](const outcome& o) { return o.done; });
        }));
        for (int i = quiet; i < burst; ++i)
            BOOST_TEST(follow[std::size_t(i)].resp.at(0).str == "f" + std::to_string(i));
        BOOST_TEST_MESSAGE("writes during the burst's loud part: " << writes_at_last - writes_at_first);
        BOOST_TEST(writes_at_last - writes_at_first >= 2u);
    });
}

// close() runs while the reader is paused in the middle of a burst: the replies already
// dispatched stand, every other request (the rest of the burst, the follow-ups) fails with
// `closed`, each handler exactly once.
BOOST_AUTO_TEST_CASE(close_during_a_burst_of_replies)
{
    test::redis_server srv(with_debug());
    asio::io_context io;
    redis::connection conn(io.get_executor(), srv.config());
    test::notifier n(io.get_executor());
    test::run_test(io, [&]() -> asio::awaitable<void> {
        BOOST_TEST_REQUIRE(!co_await test::connect(conn));
        constexpr int burst = 64;
        outcome sleep;
        start_exec(conn, cmd("DEBUG", "SLEEP", "0.2"), 5s, sleep, n);
        std::vector<outcome> first(burst), follow(burst);
        std::vector<int> calls(burst, 0);
        for (int i = 0; i < burst; ++i) {
            conn.async_exec(cmd("ECHO", std::to_string(i)), 5s, [&, i](error_code ec, redis::response r) {
                auto k = std::size_t(i);
                ++calls[k];
                first[k] = {true, ec, std::move(r)};
                n.notify();
                if (ec)
                    return;
                start_exec(conn, cmd("ECHO", "f" + std::to_string(i)), 5s, follow[k], n);
                if (i == 15)  // the reader pauses within 16 replies from here: close meanwhile
                    asio::post(io, [&] { conn.close(); });
            });
        }
        BOOST_TEST_REQUIRE(co_await n.wait([&] {
            for (int i = 0; i < burst; ++i)
                if (!first[std::size_t(i)].done || (!first[std::size_t(i)].ec && !follow[std::size_t(i)].done))
                    return false;
            return sleep.done;
        }));
        // A prefix of the burst was dispatched, then the close cut it short (dispatched whole,
        // all 64 would have succeeded before the posted close ran).
        int served = 0;
        while (served < burst && !first[std::size_t(served)].ec)
            ++served;
        BOOST_TEST_MESSAGE("replies dispatched before the close: " << served);
        BOOST_TEST(served >= 16);
        BOOST_TEST(served < burst);
        for (int i = 0; i < burst; ++i) {
            auto k = std::size_t(i);
            BOOST_TEST(calls[k] == 1);
            if (i < served) {
                BOOST_TEST(first[k].resp.at(0).str == std::to_string(i));
                BOOST_TEST(follow[k].ec == error::closed);
            } else {
                BOOST_TEST(first[k].ec == error::closed);
            }
        }
        BOOST_TEST(!conn.is_connected());
    });
}

BOOST_AUTO_TEST_CASE(empty_request_is_rejected)
{
    test::redis_server srv;
    asio::io_context io;
    redis::connection conn(io.get_executor(), srv.config());
    test::run_test(io, [&]() -> asio::awaitable<void> {
        auto r = co_await exec(conn, redis::request());
        BOOST_TEST(r.ec == error::invalid_request);
        r = co_await exec(conn, cmd("PING"));
        BOOST_TEST(r.resp.at(0).str == "PONG");
    });
}

BOOST_AUTO_TEST_CASE(garbage_from_server_resets_connection)
{
    // A fake server in the test's own io_context says exactly what the test wants.
    using asio::ip::tcp;
    asio::io_context io;
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    redis::config cfg = fast_reconnect({});
    cfg.port = acceptor.local_endpoint().port();
    cfg.client_name.clear();  // no handshake: the first bytes on the wire are the test's
    redis::connection conn(io.get_executor(), cfg);
    test::notifier n(io.get_executor());
    test::run_test(io, [&]() -> asio::awaitable<void> {
        char buf[256];
        // 1. Bytes that are not RESP: the request on the wire fails, the connection resets.
        outcome first;
        start_exec(conn, cmd("PING"), 5s, first, n);
        auto s1 = co_await acceptor.async_accept(asio::use_awaitable);
        co_await s1.async_read_some(asio::buffer(buf), asio::use_awaitable);
        co_await asio::async_write(s1, asio::buffer(std::string_view("!not resp\r\n")), asio::use_awaitable);
        BOOST_TEST_REQUIRE(co_await n.wait([&] { return first.done; }));
        BOOST_TEST(first.ec == error::connection_lost);

        // 2. A reply nobody asked for is a protocol error too: the client hangs up.
        auto s2 = co_await acceptor.async_accept(asio::use_awaitable);
        co_await asio::async_write(s2, asio::buffer(std::string_view("+UNSOLICITED\r\n")), asio::use_awaitable);
        error_code ec;
        co_await s2.async_read_some(asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
        BOOST_TEST((ec == asio::error::eof || ec == asio::error::connection_reset), ec.message());

        // 3. A well-behaved server gets a working connection again.
        outcome third;
        start_exec(conn, cmd("PING"), 5s, third, n);
        auto s3 = co_await acceptor.async_accept(asio::use_awaitable);
        std::size_t got = co_await s3.async_read_some(asio::buffer(buf), asio::use_awaitable);
        BOOST_TEST(std::string_view(buf, got) == "*1\r\n$4\r\nPING\r\n");
        co_await asio::async_write(s3, asio::buffer(std::string_view("+PONG\r\n")), asio::use_awaitable);
        BOOST_TEST_REQUIRE(co_await n.wait([&] { return third.done; }));
        BOOST_TEST(!third.ec);
        BOOST_TEST(third.resp.at(0).str == "PONG");
        BOOST_TEST(conn.stats().connects == 3u);
    });
}

BOOST_AUTO_TEST_CASE(server_hangs_up_during_handshake)
{
    using asio::ip::tcp;
    asio::io_context io;
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    redis::config cfg;
    cfg.port = acceptor.local_endpoint().port();
    cfg.password = "pw";  // AUTH, then CLIENT SETNAME
    redis::connection conn(io.get_executor(), cfg);
    test::run_test(io, [&]() -> asio::awaitable<void> {
        error_code result;
        auto connecting = [&]() -> asio::awaitable<void> { result = co_await test::connect(conn); };
        auto accept_and_close = [&]() -> asio::awaitable<void> {
            auto s = co_await acceptor.async_accept(asio::use_awaitable);
            char buf[256];
            co_await s.async_read_some(asio::buffer(buf), asio::use_awaitable);
            s.close();  // the handshake's replies never come
        };
        using namespace asio::experimental::awaitable_operators;
        co_await (connecting() && accept_and_close());
        BOOST_TEST(result == error::connect_failed);
        BOOST_TEST(!conn.is_connected());
    });
}

BOOST_AUTO_TEST_CASE(completion_is_never_inline)
{
    // Even when the result is known at once (closed connection), the handler is posted.
    test::redis_server srv;
    asio::io_context io;
    redis::connection conn(io.get_executor(), srv.config());
    conn.close();
    bool called = false;
    conn.async_exec(cmd("PING"), [&](error_code ec, redis::response) {
        BOOST_TEST(ec == error::closed);
        called = true;
    });
    BOOST_TEST(!called);
    io.run_for(5s);
    BOOST_TEST(called);
}

// A reply's handler is called straight from the read loop only when it has no executor of
// its own; one bound to another executor (here another io_context, not running) runs there,
// a request or a script call alike, even though its reply was read long before.
BOOST_AUTO_TEST_CASE(a_handler_with_its_own_executor_runs_on_it)
{
    test::redis_server srv;
    asio::io_context io, other;
    redis::connection conn(io.get_executor(), srv.config());
    redis::script echo("return ARGV[1]");
    std::vector<std::string> order;
    conn.async_exec(cmd("ECHO", "plain"), [&](error_code ec, redis::response r) {
        BOOST_TEST(!ec);
        order.push_back(r.at(0).str);
    });
    conn.async_exec(cmd("ECHO", "bound"), asio::bind_executor(other, [&](error_code ec, redis::response r) {
                        BOOST_TEST(!ec);
                        order.push_back(r.at(0).str);
                    }));
    std::vector<std::string> keys, args{"bound-script"};
    conn.async_eval(echo, keys, args, asio::bind_executor(other, [&](error_code ec, redis::reply r) {
                        BOOST_TEST(!ec);
                        order.push_back(r.str);
                    }));
    bool last = false;
    conn.async_exec(cmd("ECHO", "last"), [&](error_code ec, redis::response r) {
        BOOST_TEST(!ec);
        order.push_back(r.at(0).str);
        last = true;
    });
    // Replies come in order: once "last" is in, the bound ones were read before it.
    for (auto until = std::chrono::steady_clock::now() + 10s; !last && std::chrono::steady_clock::now() < until;)
        io.run_one_for(1s);
    BOOST_TEST_REQUIRE(last);
    BOOST_TEST(order == (std::vector<std::string>{"plain", "last"}), boost::test_tools::per_element());
    other.run_for(5s);
    BOOST_TEST(order == (std::vector<std::string>{"plain", "last", "bound", "bound-script"}),
               boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
