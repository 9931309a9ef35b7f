// SPDX-License-Identifier: BSL-1.0
/*
 * Read-write lock and semaphore figures against the mutex's, per store (bench/stores.hpp:
 * a throwaway redis-server, a 3-master Redis Cluster, a 3-member etcd cluster, a 3-server
 * ZooKeeper ensemble, PostgreSQL, MariaDB), each case and its baseline measured in the same
 * run on the same store:
 *   <store>_mutex_local_handoff        16 coroutines taking turns on one mutex (local
 *                                      hand-offs)
 *   <store>_rw_local_readers           16 coroutines reading one read-write lock:
 *                                      acquisitions/s; goal: at least half the mutex's local
 *                                      hand-off rate
 *   <store>_writer_behind_readers      a writer of another registry (another process, as the
 *                                      store sees it) waits while 16 readers keep reading in
 *                                      1 ms sections: its wait, and how many reader sections
 *                                      began meanwhile
 *   <store>_mutex_uncontended          acquire+release of a mutex (Redis: ratio to the PING
 *                                      round trip, <store>_ping_rtt)
 *   <store>_semaphore_uncontended      acquire+release of a 4-permit semaphore
 *   <store>_rw_read_uncontended        acquire+release of a read-write lock's read side
 *   <store>_rw_write_uncontended       acquire+release of a read-write lock's write side
 *   <store>_rw_read_loop_uncontended   a reader's acquire+release back to back: the next
 *                                      acquire finds the read lease its last reader left
 *                                      lingering for one turn (no round trip); the four
 *                                      above each end when the store has the lease back
 *                                      (registry::async_drain)
 * The uncontended cases run in interleaved blocks (the order rotating per block) on one
 * store; each primitive's ratio is the median over the blocks of its p50 to the mutex's p50
 * in the same block. A store whose capabilities() lack a primitive gets its cases skipped
 * with a note.
 * Options: --json, --quick, --smoke (tiny counts, seconds: what ctest runs), --store NAME
 * (redis, cluster, etcd, zookeeper, postgres or mariadb; default: every store built).
 */
#include <dlock/dlock.hpp>

#include "common.hpp"
#include "stores.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using bench::clock_type;
using bench::store_factory;

namespace {

// Counts for one run size.
struct sizes {
    int per;                               // cycles per coroutine in the local cases
    int samples;                           // uncontended cycles per primitive, over all blocks
    int blocks;                            // interleaved blocks of the uncontended cases
    int warm;                              // uncontended cycles per primitive before the blocks
    int trials;                            // writer waits behind readers
    std::chrono::milliseconds writer_cap;  // a writer's longest wait before it counts as starved
};

// Runs `body` on a fresh io_context with a store from `make`, under a 300 s cap.
void with_store(const store_factory& make, std::function<asio::awaitable<void>(asio::io_context&, dlock::store&)> body)
{
    asio::io_context io;
    auto store = make(io);
    bool done = false;
    std::exception_ptr error;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            co_await body(io, *store);
            store->close();
            done = true;
        },
        [&](std::exception_ptr e) { error = e; });
    io.run_for(300s);
    if (!done) {
        // A failed or stuck phase: close the store so that the coroutines still waiting on it
        // end here, before the store goes (their frames hold registries on it).
        store->close();
        io.restart();
        io.run_for(2s);
    }
    if (error)
        std::rethrow_exception(error);
    if (!done)
        throw std::runtime_error("a phase did not finish within 300 s");
}

// The store's capabilities (a store made only to ask; it does no I/O).
unsigned capabilities_on(const store_factory& make)
{
    asio::io_context io;
    auto st = make(io);
    auto caps = st->capabilities();
    st->close();
    return caps;
}

bool has(unsigned caps, dlock::capability c)
{
    return (caps & static_cast<unsigned>(c)) != 0;
}

// 16 coroutines, each `per` acquire+release cycles of one mutex or one read-write lock's
// read side; acquisitions per second.
double local_rate(const store_factory& make, int per, bool readers)
{
    double rate = 0;
    with_store(make, [&](asio::io_context& io, dlock::store& store) -> asio::awaitable<void> {
        dlock::registry reg(store, {.lease = 3s});
        auto mx = reg.obtain("bench:hot");
        auto rw = reg.obtain_rw("bench:hot-rw");
        auto& lk = readers ? rw.read() : mx;
        co_await (co_await lk.acquire()).release();  // connected, scripts loaded
        int finished = 0;
        asio::steady_timer all_done(io, clock_type::time_point::max());
        auto t0 = clock_type::now();
        for (int c = 0; c < 16; ++c)
            asio::co_spawn(
                io,
                [&]() -> asio::awaitable<void> {
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
        // The read lease lingers a turn after its last reader: give it back before the store
        // closes.
        co_await reg.async_drain(asio::use_awaitable);
    });
    return rate;
}

struct writer_figures {
    std::vector<double> waits;  // of the writers that got in
    std::vector<double> begun;  // reader sections begun during each of those waits
    int starved = 0;            // writers that waited `writer_cap` and gave up
};

// A writer of another store object waits while 16 readers keep reading in 1 ms sections.
writer_figures writer_behind_readers(const store_factory& make, const sizes& n)
{
    writer_figures out;
    with_store(make, [&](asio::io_context& io, dlock::store& store) -> asio::awaitable<void> {
        auto other = make(io);
        {
            dlock::registry readers(store), writers(*other);
            auto rw = readers.obtain_rw("bench:stream");
            auto wr = writers.obtain_rw("bench:stream");
            co_await (co_await wr.write().acquire()).release();  // the writer's store connected
            bool stop = false;
            long begun = 0;
            int finished = 0;
            std::exception_ptr failure;  // of a reader, or of the writer's loop
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
                    },
                    [&](std::exception_ptr e) {
                        if (e && !failure)
                            failure = e;
                        stop = stop || e;
                        if (++finished == 16)
                            all_done.cancel();
                    });
            try {
                asio::steady_timer pause(io);
                for (int i = 0; i < n.trials && !failure; ++i) {
                    pause.expires_after(20ms);  // the stream runs on its own first
                    co_await pause.async_wait(asio::use_awaitable);
                    long before = begun;
                    auto t0 = clock_type::now();
                    auto [ec, g] = co_await wr.write().acquire_for(n.writer_cap, asio::as_tuple(asio::use_awaitable));
                    if (ec == dlock::error::timeout) {
                        ++out.starved;
                        continue;
                    }
                    if (ec)
                        throw boost::system::system_error(ec, "the writer's acquire");
                    out.waits.push_back(bench::us_since(t0));
                    out.begun.push_back(double(begun - before));
                    co_await g.release();
                }
            } catch (...) {
                failure = std::current_exception();
            }
            stop = true;  // the readers end their sections, then stop
            boost::system::error_code ec;
            if (finished < 16)
                co_await all_done.async_wait(asio::redirect_error(asio::use_awaitable, ec));
            if (failure)
                std::rethrow_exception(failure);
            co_await readers.async_drain(asio::use_awaitable);
            co_await writers.async_drain(asio::use_awaitable);
        }
        other->close();
    });
    return out;
}

// rw_read_loop: a reader's cycles back to back without waiting for the lease to go back, so
// each next acquire finds the read lease the last reader left lingering for one turn.
enum primitive {
    mutex,
    semaphore,
    rw_read,
    rw_write,
    rw_read_loop,
    primitive_count
};
constexpr std::array<const char*, primitive_count> primitive_names{"mutex", "semaphore", "rw_read", "rw_write",
                                                                   "rw_read_loop"};

struct uncontended_figures {
    std::array<std::vector<double>, primitive_count> lat;     // every block's samples, pooled
    std::array<std::vector<double>, primitive_count> ratios;  // per block: p50 / the mutex's p50
};

// One coroutine, one name per primitive: acquire+release cycles of each primitive served,
// in interleaved blocks (the order rotating per block).
uncontended_figures uncontended(const store_factory& make, const sizes& n, const std::vector<primitive>& kinds)
{
    uncontended_figures out;
    with_store(make, [&](asio::io_context&, dlock::store& store) -> asio::awaitable<void> {
        dlock::registry reg(store);
        auto mx = reg.obtain("bench:solo");
        std::optional<dlock::semaphore> sem;
        std::optional<dlock::rw_lock> rw;
        for (auto k : kinds) {
            if (k == semaphore)
                sem = reg.obtain_semaphore("bench:solo-sem", 4);
            else if (k == rw_read)
                rw = reg.obtain_rw("bench:solo-rw");
        }
        auto cycle = [&](primitive k) -> asio::awaitable<double> {
            auto t0 = clock_type::now();
            dlock::guard g;
            switch (k) {
            case semaphore: g = co_await sem->acquire(); break;
            case rw_read:
            case rw_read_loop: g = co_await rw->read().acquire(); break;
            case rw_write: g = co_await rw->write().acquire(); break;
            default: g = co_await mx.acquire();
            }
            co_await g.release();
            // Until the store has the lease back: a read lease lingers for one turn after its
            // last reader leaves (for a reader coming right back); the other kinds are back.
            if (k != rw_read_loop)
                co_await reg.async_drain(asio::use_awaitable);
            co_return bench::us_since(t0);
        };
        for (auto k : kinds)
            for (int i = 0; i < n.warm; ++i)
                co_await cycle(k);
        const int per_block = std::max(1, n.samples / n.blocks);
        for (int b = 0; b < n.blocks; ++b) {
            std::array<double, primitive_count> p50{};
            for (std::size_t j = 0; j < kinds.size(); ++j) {
                auto k = kinds[(j + std::size_t(b)) % kinds.size()];
                std::vector<double> block;
                for (int i = 0; i < per_block; ++i)
                    block.push_back(co_await cycle(k));
                p50[k] = bench::percentile(block, 0.5);
                out.lat[k].insert(out.lat[k].end(), block.begin(), block.end());
            }
            for (auto k : kinds)
                out.ratios[k].push_back(p50[k] / p50[mutex]);
        }
        co_await reg.async_drain(asio::use_awaitable);
    });
    return out;
}

// Every case on one store, appended to `rs`; the PING round trip's p50 if the store has one.
std::optional<double> run_store(const std::string& name, const bench::store_site& site, const sizes& n,
                                std::vector<bench::result>& rs)
{
    const auto caps = capabilities_on(site.make);
    const bool rw = has(caps, dlock::capability::read_write), sem = has(caps, dlock::capability::semaphore);
    if (!rw)
        std::fprintf(stderr, "%s: no read-write locks (capabilities): its rw cases are skipped\n", name.c_str());
    if (!sem)
        std::fprintf(stderr, "%s: no semaphores (capabilities): its semaphore case is skipped\n", name.c_str());

    std::optional<double> rtt_p50;
    if (site.redis_port != 0) {
        std::vector<double> rtt;
        bench::raw_pinger pinger(site.redis_port);
        pinger.run(n.warm, nullptr);
        pinger.run(n.samples, &rtt);
        rtt_p50 = bench::percentile(rtt, 0.5);
        auto ping = bench::summarize(name + "_ping_rtt", rtt);
        ping.note = "PING over a blocking socket, no library";
        rs.push_back(ping);
    }

    double mutex_rate = local_rate(site.make, n.per, false);
    rs.push_back({name + "_mutex_local_handoff", {}, {}, mutex_rate, {}, {}, {}, "16 coroutines, one mutex"});
    if (rw) {
        double read_rate = local_rate(site.make, n.per, true);
        rs.push_back({name + "_rw_local_readers",
                      {},
                      {},
                      read_rate,
                      read_rate / mutex_rate,
                      ">= 0.5 x mutex_local_handoff",
                      read_rate / mutex_rate >= 0.5,
                      "16 coroutines reading one read-write lock"});

        auto w = writer_behind_readers(site.make, n);
        auto wb = bench::summarize(name + "_writer_behind_readers", w.waits);
        wb.note = bench::fmt("16 readers in 1 ms sections; reader sections begun during the wait: p50 %.0f, max %.0f",
                             bench::percentile(w.begun, 0.5), bench::percentile(w.begun, 1.0));
        if (w.starved > 0)
            wb.note += bench::fmt("; %d of %d writers gave up after %lld ms", w.starved, n.trials,
                                  static_cast<long long>(n.writer_cap.count()));
        rs.push_back(wb);
    }

    std::vector<primitive> kinds{mutex};
    if (sem)
        kinds.push_back(semaphore);
    if (rw) {
        kinds.push_back(rw_read);
        kinds.push_back(rw_write);
        kinds.push_back(rw_read_loop);
    }
    auto u = uncontended(site.make, n, kinds);
    for (auto k : kinds) {
        auto r = bench::summarize(name + "_" + primitive_names[k] + "_uncontended", u.lat[k]);
        if (k == mutex) {
            if (rtt_p50) {
                r.ratio = *r.p50_us / *rtt_p50;
                r.note = "acquire+release (and the store has it back); ratio to the PING round trip";
            } else {
                r.note = "acquire+release";
            }
        } else {
            r.ratio = bench::percentile(u.ratios[k], 0.5);
            r.note = bench::fmt("%s; ratio to mutex_uncontended (median of %d blocks)",
                                k == semaphore      ? "4 permits; acquire+release"
                                : k == rw_read_loop ? "read acquire+release back to back (the lingering read lease)"
                                                    : "acquire+release",
                                n.blocks);
        }
        rs.push_back(r);
    }
    return rtt_p50;
}

}  // namespace

int main(int argc, char** argv)
{
    bool as_json = false;
    auto size = bench::run_size::full;
    std::string only;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--json")
            as_json = true;
        else if (a == "--store" && i + 1 < argc)
            only = argv[++i];
        else if (!bench::parse_run_size(a, size)) {
            std::printf("usage: primitives_bench [--json] [--quick | --smoke] [--store %s]\n",
                        bench::store_names().c_str());
            return a == "--help" ? 0 : 2;
        }
    }
    const sizes n{
        bench::by_size(size, 10000, 2000, 200), bench::by_size(size, 5000, 1000, 40),
        bench::by_size(size, 10, 5, 2),         bench::by_size(size, 300, 100, 5),
        bench::by_size(size, 100, 20, 3),       bench::by_size<std::chrono::milliseconds>(size, 30s, 10s, 5s)};
    try {
        if (!only.empty() && !bench::is_built(only))
            throw std::runtime_error("no such store built: " + only + " (built: " + bench::store_names(", ") + ")");
        std::vector<bench::result> rs;
        double rtt_p50 = 0;  // Redis's PING, on every JSON line as before (0 without Redis)
        for (const auto& row : bench::stores_built()) {
            if (!only.empty() && only != row.name)
                continue;
            auto site = row.start();
            if (auto rtt = run_store(row.name, site, n, rs))
                rtt_p50 = *rtt;
        }
        if (as_json) {
            for (auto& r : rs)
                bench::print_json(r, rtt_p50);
        } else {
            bench::print_table(rs);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "primitives_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
