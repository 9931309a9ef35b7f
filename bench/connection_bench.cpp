// SPDX-License-Identifier: BSL-1.0
/*
 * connection_bench: how close one dlock connection gets to what the server allows.
 *
 * One run, one throwaway redis-server on a free loopback port, these cases:
 *   raw_ping_rtt              PING over a plain blocking POSIX socket: the server round trip
 *                             with no library in the way (the baseline for latency).
 *   dlock_ping_sequential     PING through dlock, one coroutine, one request at a time.
 *   dlock_set_get_sequential  SET and GET alternately through dlock, one coroutine.
 *   dlock_pipelined_64        64 coroutines sharing one connection, PING each in a loop.
 *   dlock_pipelined_64_no_timeout  the same with request timeout 0 (no deadline to track).
 *   redis_benchmark_c50_P16   redis-benchmark -c 50 -P 16 -t ping: the server's ceiling.
 *   redis_benchmark_c1_P1     redis-benchmark -c 1 -P 1 -t ping: its sequential figure.
 * The three sequential cases take turns in 5 rounds on the same server (after 1,000 warm-up
 * requests each), so background load falls on them alike; the three throughput cases take
 * turns in 3 rounds and the best round of each is reported. Then two ratios:
 * dlock_set_get_sequential p50 / raw PING RTT p50 (goal <= 1.2) and dlock_pipelined_64 /
 * redis_benchmark_c50_P16 requests/s (goal >= 0.6).
 *
 * Options: --json (one JSON object per line instead of the table), --samples N (sequential
 * samples after 1,000 warm-up requests, default 5,000), --requests N (pipelined total,
 * default 200,000), --smoke (100 samples, 2,000 requests, one round: what ctest runs).
 *
 * Timeouts: dlock requests keep the default 5 s request timeout (the no_timeout case
 * excepted); the raw socket has a 5 s receive timeout; each measured phase runs under
 * io_context::run_for(120 s). None of them should ever fire on a loopback server: they only
 * turn a bug into an error instead of a hang.
 */
#include <dlock/redis/connection.hpp>

#include "common.hpp"
#include "common/redis_server.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace redis = dlock::redis;
using bench::clock_type;
using bench::result;
using bench::summarize;
using bench::us_since;

namespace {

constexpr int warmup = 1000;

// ---- dlock -------------------------------------------------------------------------------

// Runs `body` as the only coroutine on a fresh io_context with its own connection.
template <class Body>
void with_connection(const redis::config& cfg, Body body)
{
    asio::io_context io;
    redis::connection conn(io.get_executor(), cfg);
    std::exception_ptr error;
    bool done = false;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            co_await conn.async_connect();
            co_await body(conn);
            done = true;
            conn.close();
        },
        [&](std::exception_ptr e) { error = e; });
    io.run_for(std::chrono::seconds(120));
    if (error)
        std::rethrow_exception(error);
    if (!done)
        throw std::runtime_error("a benchmark phase did not finish within 120 s");
}

asio::awaitable<void> dlock_run(redis::connection& conn, const redis::request& a, const redis::request& b, int n,
                                std::vector<double>* lat)
{
    for (int i = 0; i < n; ++i) {
        auto t0 = clock_type::now();
        co_await conn.async_exec(i % 2 == 0 ? a : b);
        if (lat)
            lat->push_back(us_since(t0));
    }
}

// The three sequential cases take turns in rounds on the same server, so background load
// (other processes on the machine) falls on each of them alike.
std::vector<result> sequential_cases(const redis::config& cfg, int samples)
{
    constexpr int rounds = 5;
    int per_round = std::max(1, samples / rounds);
    std::vector<double> raw, ping, set_get;
    bench::raw_pinger pinger(cfg.port);
    with_connection(cfg, [&](redis::connection& conn) -> asio::awaitable<void> {
        redis::request p, set, get;
        p.push("PING");
        set.push("SET", "bench:key", "0123456789abcdef");
        get.push("GET", "bench:key");
        pinger.run(warmup, nullptr);
        co_await dlock_run(conn, p, p, warmup, nullptr);
        co_await dlock_run(conn, set, get, warmup, nullptr);
        for (int r = 0; r < rounds; ++r) {
            pinger.run(per_round, &raw);  // blocks this thread: nothing else runs meanwhile
            co_await dlock_run(conn, p, p, per_round, &ping);
            co_await dlock_run(conn, set, get, per_round, &set_get);
        }
    });
    return {summarize("raw_ping_rtt", raw), summarize("dlock_ping_sequential", ping),
            summarize("dlock_set_get_sequential", set_get)};
}

result dlock_pipelined(redis::config cfg, int total, int coroutines, bool with_timeout)
{
    if (!with_timeout)
        cfg.request_timeout = std::chrono::milliseconds(0);
    int per = std::max(1, total / coroutines);
    std::vector<double> lat;
    lat.reserve(std::size_t(per) * std::size_t(coroutines));
    double elapsed_us = 0;
    with_connection(cfg, [&](redis::connection& conn) -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        redis::request ping;
        ping.push("PING");
        for (int round = 0; round < 2; ++round) {  // round 0 warms up, round 1 is measured
            int n = round == 0 ? std::max(1, warmup * 10 / coroutines) : per;
            bool measured = round == 1;
            // A timer that never expires on its own is the "all coroutines done" latch.
            asio::steady_timer all_done(ex, clock_type::time_point::max());
            int running = coroutines;
            std::exception_ptr failure;
            auto start = clock_type::now();
            for (int c = 0; c < coroutines; ++c) {
                asio::co_spawn(
                    ex,
                    [&, n, measured]() -> asio::awaitable<void> {
                        for (int i = 0; i < n; ++i) {
                            auto t0 = clock_type::now();
                            co_await conn.async_exec(ping);
                            if (measured)
                                lat.push_back(us_since(t0));
                        }
                    },
                    [&](std::exception_ptr e) {
                        if (e && !failure)
                            failure = e;
                        if (--running == 0)
                            all_done.cancel();
                    });
            }
            boost::system::error_code ignored;
            co_await all_done.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
            if (failure)
                std::rethrow_exception(failure);
            if (measured)
                elapsed_us = us_since(start);
        }
    });
    double ops = double(per) * coroutines / (elapsed_us / 1e6);
    return summarize(with_timeout ? "dlock_pipelined_64" : "dlock_pipelined_64_no_timeout", lat, ops);
}

// ---- redis-benchmark on the same server --------------------------------------------------

result redis_benchmark(std::uint16_t port, int clients, int pipeline, int requests)
{
    std::vector<std::string> argv = {"redis-benchmark",
                                     "-h",
                                     "127.0.0.1",
                                     "-p",
                                     std::to_string(port),
                                     "-c",
                                     std::to_string(clients),
                                     "-P",
                                     std::to_string(pipeline),
                                     "-t",
                                     "ping",
                                     "-n",
                                     std::to_string(requests),
                                     "-q"};
    int status = 0;
    std::string out = dlock::test::run_capture(argv, &status);
    // -q prints progress lines ending in \r, then "PING_MBULK: 123.45 requests per second,
    // p50=0.123 msec". PING_MBULK is the RESP form, the one dlock sends. A run shorter than
    // its clock's tick (a --smoke run's few requests) says "inf": no rate then.
    static const std::regex line(R"(PING_MBULK: ([0-9.]+|inf) requests per second(, p50=([0-9.]+) msec)?)");
    std::optional<double> rps, p50;
    bool seen = false;
    for (std::sregex_iterator it(out.begin(), out.end(), line), end; it != end; ++it) {
        seen = true;
        rps.reset();
        if ((*it)[1].str() != "inf")
            rps = std::stod((*it)[1].str());
        if ((*it)[3].matched)
            p50 = std::stod((*it)[3].str()) * 1000.0;
    }
    if (!seen)
        throw std::runtime_error("could not parse redis-benchmark output (is redis-tools installed?): " + out);
    result r;
    r.name = "redis_benchmark_c" + std::to_string(clients) + "_P" + std::to_string(pipeline);
    r.p50_us = p50;
    r.ops_per_s = rps;
    return r;
}

// ---- main ----------------------------------------------------------------------------------

int positive_arg(int argc, char** argv, int& i)
{
    if (i + 1 >= argc)
        throw std::invalid_argument(std::string(argv[i]) + " needs a value");
    int v = std::atoi(argv[++i]);
    if (v <= 0)
        throw std::invalid_argument(std::string(argv[i - 1]) + " needs a positive number");
    return v;
}

}  // namespace

int main(int argc, char** argv)
{
    bool as_json = false;
    int samples = 5000;
    int requests = 200000;
    int rounds = 3;
    try {
        for (int i = 1; i < argc; ++i) {
            std::string a = argv[i];
            if (a == "--json")
                as_json = true;
            else if (a == "--samples")
                samples = positive_arg(argc, argv, i);
            else if (a == "--requests")
                requests = positive_arg(argc, argv, i);
            else if (a == "--smoke") {
                samples = 100;  // tiny counts, seconds: what ctest runs
                requests = 2000;
                rounds = 1;
            } else if (a == "--help" || a == "-h") {
                std::printf("usage: connection_bench [--json] [--samples N] [--requests N] [--smoke]\n");
                return 0;
            } else
                throw std::invalid_argument("unknown option " + a);
        }

        dlock::test::redis_server server;
        auto cfg = server.config();
        std::vector<result> rows = sequential_cases(cfg, samples);
        // Throughput: the cases take turns, three rounds, best round each (background load
        // only ever lowers a figure).
        std::vector<result> best;
        for (int round = 0; round < rounds; ++round) {
            result now[] = {dlock_pipelined(cfg, requests, 64, true), dlock_pipelined(cfg, requests, 64, false),
                            redis_benchmark(server.port(), 50, 16, requests)};
            for (std::size_t i = 0; i < std::size(now); ++i) {
                if (round == 0)
                    best.push_back(now[i]);
                else if (now[i].ops_per_s.value_or(0) > best[i].ops_per_s.value_or(0))
                    best[i] = now[i];
            }
        }
        rows.insert(rows.end(), best.begin(), best.end());
        rows.push_back(redis_benchmark(server.port(), 1, 1, std::max(1, requests / 4)));

        auto find = [&](const char* name) -> const result& {
            return *std::find_if(rows.begin(), rows.end(), [&](const result& r) { return r.name == name; });
        };
        double rtt = *find("raw_ping_rtt").p50_us;
        result latency;
        latency.name = "ratio_single_p50_over_rtt";
        latency.ratio = *find("dlock_set_get_sequential").p50_us / rtt;
        latency.goal = "<= 1.2";
        latency.met = *latency.ratio <= 1.2;
        latency.note = "dlock_set_get_sequential p50 / raw_ping_rtt p50";
        result throughput;
        throughput.name = "ratio_pipelined_over_redis_benchmark";
        throughput.goal = ">= 0.6";
        throughput.note = "dlock_pipelined_64 / redis_benchmark_c50_P16 requests/s";
        if (auto floor = find("redis_benchmark_c50_P16").ops_per_s) {
            throughput.ratio = find("dlock_pipelined_64").ops_per_s.value_or(0) / *floor;
            throughput.met = *throughput.ratio >= 0.6;
        } else {
            throughput.note += " (redis-benchmark ran too short to time: no ratio)";
        }
        rows.push_back(latency);
        rows.push_back(throughput);

        if (as_json) {
            for (const auto& r : rows)
                bench::print_json(r, rtt);
            return 0;
        }
        std::printf("dlock connection_bench: redis-server on 127.0.0.1:%u, %d samples, %d pipelined requests\n\n",
                    unsigned(server.port()), samples, requests);
        bench::print_table(rows);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "connection_bench: %s\n", e.what());
        return 1;
    }
}
