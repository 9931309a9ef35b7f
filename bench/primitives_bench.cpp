// SPDX-License-Identifier: BSL-1.0
/*
 * Read-write lock and semaphore figures against the mutex's, on one throwaway redis-server,
 * each case and its baseline measured in the same run:
 *   mutex_local_handoff      16 coroutines taking turns on one mutex (local hand-offs)
 *   rw_local_readers         16 coroutines reading one read-write lock: acquisitions/s;
 *                            goal: at least half the mutex's local hand-off rate
 *   writer_behind_readers    a writer of another registry (another process, as the store
 *                            sees it) waits while 16 readers keep reading in 1 ms sections:
 *                            its wait, and how many reader sections began meanwhile
 *   mutex_uncontended        acquire+release p50 of a mutex
 *   semaphore_uncontended    acquire+release p50 of a 4-permit semaphore; ratio to the mutex's
 * Options: --json, --quick, --smoke (tiny counts, seconds: what ctest runs).
 */
#include <dlock/dlock.hpp>

#include "common.hpp"
#include "common/redis_server.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using bench::clock_type;

namespace {

dlock::redis::config config_for(std::uint16_t port)
{
    dlock::redis::config c;
    c.port = port;
    return c;
}

// Runs `body` on a fresh io_context with a redis_store, under a 120 s cap.
void with_store(std::uint16_t port, std::function<asio::awaitable<void>(asio::io_context&, dlock::redis_store&)> body)
{
    asio::io_context io;
    dlock::redis_store store(io.get_executor(), config_for(port));
    bool done = false;
    std::exception_ptr error;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            co_await body(io, store);
            store.close();
            done = true;
        },
        [&](std::exception_ptr e) { error = e; });
    io.run_for(120s);
    if (error)
        std::rethrow_exception(error);
    if (!done)
        throw std::runtime_error("a phase did not finish within 120 s");
}

// 16 coroutines, each `per` acquire+release cycles of one mutex or one read-write lock's
// read side; acquisitions per second.
double local_rate(std::uint16_t port, int per, bool readers)
{
    double rate = 0;
    with_store(port, [&](asio::io_context& io, dlock::redis_store& store) -> asio::awaitable<void> {
        dlock::registry reg(store);
        auto mx = reg.obtain("bench:hot");
        auto rw = reg.obtain_rw("bench:hot-rw");
        co_await (co_await mx.acquire()).release();  // connected, scripts loaded
        co_await (co_await rw.read().acquire()).release();
        int finished = 0;
        asio::steady_timer all_done(io, clock_type::time_point::max());
        auto t0 = clock_type::now();
        for (int c = 0; c < 16; ++c)
            asio::co_spawn(
                io,
                [&]() -> asio::awaitable<void> {
                    auto& lk = readers ? rw.read() : mx;
                    for (int i = 0; i < per; ++i) {
                        auto g = co_await lk.acquire();
                        co_await g.release();
                    }
                    if (++finished == 16)
                        all_done.cancel();
                },
                asio::detached);
        boost::system::error_code ec;
        co_await all_done.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        rate = 16.0 * per / std::chrono::duration<double>(clock_type::now() - t0).count();
    });
    return rate;
}

// The writer's waits, and the reader sections begun during each.
std::vector<double> writer_behind_readers(std::uint16_t port, int trials, std::vector<double>& begun_during)
{
    std::vector<double> waits;
    with_store(port, [&](asio::io_context& io, dlock::redis_store& store) -> asio::awaitable<void> {
        dlock::redis_store other(io.get_executor(), config_for(port));
        dlock::registry readers(store), writers(other);
        auto rw = readers.obtain_rw("bench:stream");
        auto wr = writers.obtain_rw("bench:stream");
        bool stop = false;
        long begun = 0;
        int finished = 0;
        asio::steady_timer all_done(io, clock_type::time_point::max());
        for (int c = 0; c < 16; ++c)
            asio::co_spawn(
                io,
                [&]() -> asio::awaitable<void> {
                    asio::steady_timer t(io);
                    while (!stop) {
                        auto g = co_await rw.read().acquire();
                        ++begun;
                        t.expires_after(1ms);
                        co_await t.async_wait(asio::use_awaitable);
                        co_await g.release();
                    }
                    if (++finished == 16)
                        all_done.cancel();
                },
                asio::detached);
        asio::steady_timer pause(io);
        for (int i = 0; i < trials; ++i) {
            pause.expires_after(20ms);  // the stream runs on its own first
            co_await pause.async_wait(asio::use_awaitable);
            long before = begun;
            auto t0 = clock_type::now();
            auto g = co_await wr.write().acquire();
            waits.push_back(bench::us_since(t0));
            begun_during.push_back(double(begun - before));
            co_await g.release();
        }
        stop = true;
        boost::system::error_code ec;
        co_await all_done.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        other.close();
    });
    return waits;
}

std::vector<double> uncontended(std::uint16_t port, int warm, int samples, bool semaphore)
{
    std::vector<double> lat;
    with_store(port, [&](asio::io_context&, dlock::redis_store& store) -> asio::awaitable<void> {
        dlock::registry reg(store);
        auto mx = reg.obtain("bench:solo");
        auto sem = reg.obtain_semaphore("bench:solo-sem", 4);
        for (int i = 0; i < samples + warm; ++i) {
            auto t0 = clock_type::now();
            dlock::guard g;
            if (semaphore)
                g = co_await sem.acquire();
            else
                g = co_await mx.acquire();
            co_await g.release();
            if (i >= warm)
                lat.push_back(bench::us_since(t0));
        }
    });
    return lat;
}

}  // namespace

int main(int argc, char** argv)
{
    bool as_json = false;
    auto size = bench::run_size::full;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--json")
            as_json = true;
        else if (!bench::parse_run_size(a, size)) {
            std::printf("usage: primitives_bench [--json] [--quick | --smoke]\n");
            return a == "--help" ? 0 : 2;
        }
    }
    try {
        dlock::test::redis_server srv;
        auto port = srv.port();
        int per = bench::by_size(size, 10000, 2000, 200), samples = bench::by_size(size, 5000, 1000, 100),
            trials = bench::by_size(size, 100, 20, 3), warm = bench::by_size(size, 300, 300, 20);
        std::vector<double> rtt;
        bench::raw_pinger pinger(port);
        pinger.run(bench::by_size(size, 500, 500, 20), nullptr);
        pinger.run(samples, &rtt);
        double rtt_p50 = bench::percentile(rtt, 0.5);

        std::vector<bench::result> rs;
        double mutex_rate = local_rate(port, per, false);
        rs.push_back({"mutex_local_handoff", {}, {}, mutex_rate, {}, {}, {}, "16 coroutines, one mutex"});
        double read_rate = local_rate(port, per, true);
        bench::result rd{"rw_local_readers", {}, {}, read_rate, read_rate / mutex_rate, ">= 0.5 x mutex_local_handoff",
                         read_rate / mutex_rate >= 0.5, "16 coroutines reading one read-write lock"};
        rs.push_back(rd);

        std::vector<double> begun;
        auto waits = writer_behind_readers(port, trials, begun);
        auto wb = bench::summarize("writer_behind_readers", waits);
        char note[160];
        std::snprintf(note, sizeof note,
                      "16 readers in 1 ms sections; reader sections begun during the wait: p50 %.0f, max %.0f",
                      bench::percentile(begun, 0.5), bench::percentile(begun, 1.0));
        wb.note = note;
        rs.push_back(wb);

        auto mx = bench::summarize("mutex_uncontended", uncontended(port, warm, samples, false));
        mx.ratio = *mx.p50_us / rtt_p50;
        mx.note = "ratio to the PING round trip";
        rs.push_back(mx);
        auto sem = bench::summarize("semaphore_uncontended", uncontended(port, warm, samples, true));
        sem.ratio = *sem.p50_us / *mx.p50_us;
        sem.note = "4 permits; ratio to mutex_uncontended";
        rs.push_back(sem);

        if (as_json) {
            for (auto& r : rs)
                bench::print_json(r, rtt_p50);
        } else {
            std::printf("PING round trip p50: %.1f us\n", rtt_p50);
            bench::print_table(rs);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "primitives_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
