/*
 * pipeline_demo: one dlock connection, many coroutines, few socket writes.
 *
 * Starts a throwaway redis-server on a free loopback port, connects, and lets 100
 * coroutines each send 100 INCR commands one after another (10,000 in all) on the same
 * connection. Whatever is queued while a write is in flight goes out in the next single
 * write, so the number of socket writes ends up far below the number of requests. Prints
 * what it did and exits 0 if the counter reached 10,000.
 *
 * Timeouts: every request keeps config::request_timeout (5 s by default): on a loopback
 * server a request that takes that long means something is broken, and it then fails with
 * dlock::error::timeout instead of hanging. The whole run is capped by io_context::run_for
 * (60 s) for the same reason.
 *
 * This demo shows the connection layer that exists today; the lock demo replaces it once
 * the lock API lands.
 */
#include <dlock/redis/connection.hpp>

#include "common/redis_server.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>

namespace asio = boost::asio;
namespace redis = dlock::redis;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr int coroutines = 100;
constexpr int requests_per_coroutine = 100;
constexpr long long expected = static_cast<long long>(coroutines) * requests_per_coroutine;

struct outcome {
    bool finished = false;
    std::exception_ptr error;
    clock_type::duration elapsed{};
    long long counter = -1;
    redis::connection_stats stats;
};

// One caller among many: each request waits for its own reply, as application code would.
asio::awaitable<void> worker(redis::connection& conn)
{
    redis::request incr;
    incr.push("INCR", "demo:counter");
    for (int i = 0; i < requests_per_coroutine; ++i)
        co_await conn.async_exec(incr);  // throws boost::system::system_error on failure
}

asio::awaitable<void> run_demo(redis::connection& conn, outcome& out)
{
    co_await conn.async_connect();
    auto ex = co_await asio::this_coro::executor;

    // A timer that never expires on its own serves as the "all workers done" latch.
    asio::steady_timer all_done(ex, clock_type::time_point::max());
    int running = coroutines;
    auto start = clock_type::now();
    for (int c = 0; c < coroutines; ++c) {
        asio::co_spawn(ex, worker(conn), [&](std::exception_ptr e) {
            if (e && !out.error)
                out.error = e;
            if (--running == 0)
                all_done.cancel();
        });
    }
    boost::system::error_code ignored;
    co_await all_done.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
    out.elapsed = clock_type::now() - start;
    out.stats = conn.stats();

    redis::request get;
    get.push("GET", "demo:counter");
    auto resp = co_await conn.async_exec(get);
    out.counter = std::stoll(resp.at(0).str);
    out.finished = true;
    conn.close();
}

}  // namespace

int main()
{
    try {
        dlock::test::redis_server server;
        asio::io_context io;
        redis::connection conn(io.get_executor(), server.config());
        outcome out;
        asio::co_spawn(io, run_demo(conn, out), [&](std::exception_ptr e) {
            if (e && !out.error)
                out.error = e;
        });
        io.run_for(std::chrono::seconds(60));

        if (out.error)
            std::rethrow_exception(out.error);
        if (!out.finished) {
            std::fprintf(stderr, "pipeline_demo: did not finish within 60 s\n");
            return 1;
        }
        double ms = std::chrono::duration<double, std::milli>(out.elapsed).count();
        auto requests = out.stats.requests;  // the INCRs; the final GET is not counted here
        auto writes = out.stats.batches;
        std::printf("dlock pipeline demo\n");
        std::printf("  server          throwaway redis-server on 127.0.0.1:%u\n", unsigned(server.port()));
        std::printf("  workload        %d coroutines x %d INCR on one connection\n", coroutines,
                    requests_per_coroutine);
        std::printf("  requests        %llu\n", static_cast<unsigned long long>(requests));
        std::printf("  socket writes   %llu (%.1f requests per write)\n", static_cast<unsigned long long>(writes),
                    writes ? double(requests) / double(writes) : 0.0);
        std::printf("  elapsed         %.1f ms\n", ms);
        std::printf("  throughput      %.0f requests/s\n", ms > 0 ? double(requests) * 1000.0 / ms : 0.0);
        std::printf("  counter         %lld (expected %lld)\n", out.counter, expected);
        if (out.counter != expected) {
            std::fprintf(stderr, "pipeline_demo: wrong counter value\n");
            return 1;
        }
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "pipeline_demo: %s\n", e.what());
        return 1;
    }
}
