// SPDX-License-Identifier: BSL-1.0
/*
 * zk_bench: what the lock costs on ZooKeeper, against Apache Curator's InterProcessMutex on
 * the same throwaway 3-server ensemble in the same run.
 *
 *   raw_cycle_floor             the recipe's own requests (create ephemeral-sequential and
 *                               getChildren pipelined, then delete) through the C client,
 *                               no lock library
 *   uncontended_acquire_release one coroutine, one name, registry + zookeeper_store; ratio
 *                               to raw_cycle_floor
 *   curator_uncontended         the same with InterProcessMutex (a JVM timing itself);
 *                               dlock's ratio to it
 *   handoff                     two sessions take turns, one queued behind the other: the
 *                               time from the holder's release to the waiter's acquire
 *   curator_handoff             the same with two Curator clients in one JVM
 * Options: --json (one JSON object per line), --quick (fewer samples), --smoke (tiny counts,
 * seconds: what ctest runs).
 */
#include <dlock/dlock.hpp>
#include <dlock/zookeeper.hpp>

#include "common.hpp"
#include "common/redis_server.hpp"
#include "common/zk_ensemble.hpp"
#include "zookeeper/client.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <zookeeper/zookeeper.h>

#include <filesystem>
#include <iostream>
#include <sstream>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using bench::clock_type;
using dlock::test::zk_ensemble;

namespace {

dlock::zookeeper::config config_of(const std::string& url)
{
    dlock::zookeeper::config c;
    dlock::zookeeper::config_error err;
    if (!dlock::zookeeper::parse_url(url, c, err))
        throw std::runtime_error(err.message);
    return c;
}

template <class Body>
void run(asio::io_context& io, Body body)
{
    std::exception_ptr failure;
    bool done = false;
    io.restart();
    asio::co_spawn(io, body(), [&](std::exception_ptr e) {
        failure = e;
        done = true;
    });
    auto until = clock_type::now() + 300s;
    while (!done && clock_type::now() < until) {
        io.run_one_for(1s);
        if (io.stopped())
            io.restart();
    }
    io.restart();
    if (failure)
        std::rethrow_exception(failure);
    if (!done)
        throw std::runtime_error("a bench phase did not finish in 300 s");
}

// Where every client of the bench connects: one follower, so the floor, dlock and Curator
// all pay the same forwarding of writes to the leader (connected to the ensemble, each
// client picks a server at random, and one on the leader answers writes a hop sooner).
struct target {
    std::string connect;  ///< 127.0.0.1:port (the C client's and Curator's form)
    std::string url;      ///< zk://127.0.0.1:port
};

target one_follower(const zk_ensemble& z)
{
    auto leader = z.leader();
    auto i = leader == z.size() ? 0 : (leader + 1) % z.size();
    auto hp = "127.0.0.1:" + std::to_string(z.client_port(i));
    return {hp, "zk://" + hp};
}

// The floor: the recipe's requests through the C client driver, no lock library.
std::vector<double> raw_floor(asio::io_context& io, const target& z, int samples)
{
    namespace zd = dlock::zookeeper::detail;
    std::vector<double> out;
    std::string err;
    bool up = false;
    auto c = zd::client::open(
        io.get_executor(), z.connect, 10s, [&](int s) { up = s == ZOO_CONNECTED_STATE; }, err);
    if (!c)
        throw std::runtime_error(err);
    while (!up)
        io.run_one();
    // The parent, again after a connection lost while the ensemble settles (a child's create
    // would then fail with ZNONODE).
    int pending = 0;
    for (int rc = ZCONNECTIONLOSS, tries = 0; rc != ZOK && rc != ZNODEEXISTS; ++tries) {
        if (tries == 20 || (rc != ZCONNECTIONLOSS && rc != ZOPERATIONTIMEOUT))
            throw std::runtime_error(std::string("raw create of /rawbench: ") + zerror(rc));
        while (!up)
            io.run_one();
        pending = 1;
        c->create("/rawbench", "", ZOO_PERSISTENT, [&](int r, std::string, zd::node_stat) {
            rc = r;
            --pending;
        });
        while (pending)
            io.run_one();
    }
    for (int i = 0; i < samples + 50; ++i) {
        auto t0 = clock_type::now();
        std::string node;
        pending = 2;
        c->create("/rawbench/_c_x-lock-", "t", ZOO_EPHEMERAL_SEQUENTIAL, [&](int rc, std::string p, zd::node_stat) {
            if (rc != ZOK)
                throw std::runtime_error(std::string("raw create failed: ") + zerror(rc));
            node = p;
            --pending;
        });
        c->get_children("/rawbench", [&](int, std::vector<std::string>) { --pending; });
        while (pending)
            io.run_one();
        pending = 1;
        c->remove(node, [&](int) { --pending; });
        while (pending)
            io.run_one();
        if (i >= 50)
            out.push_back(bench::us_since(t0));
    }
    c->close();
    io.poll();
    return out;
}

std::vector<double> uncontended(asio::io_context& io, const target& z, int samples)
{
    std::vector<double> out;
    dlock::zookeeper_store store(io.get_executor(), config_of(z.url));
    dlock::registry reg(store, {.lease = 10s});
    run(io, [&]() -> asio::awaitable<void> {
        auto lock = reg.obtain("bench:solo");
        for (int i = 0; i < samples + 50; ++i) {
            auto t0 = clock_type::now();
            auto g = co_await lock.acquire();
            co_await g.release();
            if (i >= 50)
                out.push_back(bench::us_since(t0));
        }
        store.close();
    });
    return out;
}

std::vector<double> handoff(asio::io_context& io, const target& z, int samples)
{
    std::vector<double> out;
    dlock::zookeeper_store sa(io.get_executor(), config_of(z.url)), sb(io.get_executor(), config_of(z.url));
    dlock::registry ra(sa, {.lease = 10s}), rb(sb, {.lease = 10s});
    run(io, [&]() -> asio::awaitable<void> {
        asio::steady_timer t(co_await asio::this_coro::executor);
        for (int i = 0; i < samples + 10; ++i) {
            auto& holder = i % 2 ? rb : ra;
            auto& waiter = i % 2 ? ra : rb;
            auto g = co_await holder.obtain("bench:handoff").acquire();
            clock_type::time_point got{};
            bool done = false;
            asio::co_spawn(
                co_await asio::this_coro::executor,
                [&]() -> asio::awaitable<void> {
                    auto w = co_await waiter.obtain("bench:handoff").acquire();
                    got = clock_type::now();
                    co_await w.release();
                    done = true;
                },
                asio::detached);
            while ((co_await sa.async_status("dlock:bench:handoff", asio::use_awaitable)).queued < 1) {
                t.expires_after(1ms);
                co_await t.async_wait(asio::use_awaitable);
            }
            auto t0 = clock_type::now();
            co_await g.release();
            while (!done) {
                t.expires_after(200us);
                co_await t.async_wait(asio::use_awaitable);
            }
            if (i >= 10)
                out.push_back(std::chrono::duration<double, std::micro>(got - t0).count());
        }
        sa.close();
        sb.close();
    });
    return out;
}

std::pair<double, double> curator(const std::vector<std::string>& args)
{
    static const std::string dir = [] {
        char d[] = "/tmp/dlock-zkb-XXXXXX";
        if (!::mkdtemp(d))
            throw std::runtime_error("mkdtemp failed");
        int status = -1;
        auto out = dlock::test::run_capture(
            {"/usr/bin/javac", "-cp", zk_ensemble::curator_classpath(), "-d", d, DLOCK_CURATOR_SOURCE}, &status);
        if (status != 0)
            throw std::runtime_error("javac failed: " + out);
        return std::string(d);
    }();
    std::vector<std::string> argv = {
        "/usr/bin/java", "-Xmx128m", "-XX:+UseSerialGC", "-cp", zk_ensemble::curator_classpath() + ":" + dir,
        "CuratorLock"};
    argv.insert(argv.end(), args.begin(), args.end());
    int status = -1;
    auto out = dlock::test::run_capture(argv, &status);
    auto p50 = out.find("p50_us="), p99 = out.find("p99_us=");
    if (status != 0 || p50 == std::string::npos || p99 == std::string::npos)
        throw std::runtime_error("CuratorLock failed: " + out);
    return {std::stod(out.substr(p50 + 7)), std::stod(out.substr(p99 + 7))};
}

}  // namespace

int main(int argc, char** argv)
{
    bool json = false;
    auto size = bench::run_size::full;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        json = json || a == "--json";
        bench::parse_run_size(a, size);
    }
    const int samples = bench::by_size(size, 1000, 200, 20), handoffs = bench::by_size(size, 200, 50, 5);
    try {
        zk_ensemble ensemble;
        auto z = one_follower(ensemble);
        asio::io_context io;
        auto floor = bench::summarize("raw_cycle_floor", raw_floor(io, z, samples));
        auto lib = bench::summarize("uncontended_acquire_release", uncontended(io, z, samples));
        lib.ratio = *lib.p50_us / *floor.p50_us;
        auto [cp50, cp99] = curator({"bench", z.connect, "/bench/curator-solo", std::to_string(samples)});
        bench::result cur{"curator_uncontended",      cp50, cp99, {}, *lib.p50_us / cp50,
                          "dlock p50 <= Curator p50", {},   ""};
        cur.met = *lib.p50_us <= cp50;
        cur.note = "ratio = dlock p50 / Curator p50; dlock p99 " + std::to_string(*lib.p99_us) + " us";
        auto hand = bench::summarize("handoff", handoff(io, z, handoffs));
        auto [hp50, hp99] = curator({"handoff", z.connect, "/bench/curator-handoff", std::to_string(handoffs)});
        bench::result chand{"curator_handoff", hp50, hp99, {}, *hand.p50_us / hp50, "dlock p50 <= Curator p50", {}, ""};
        chand.met = *hand.p50_us <= hp50;
        chand.note = "ratio = dlock p50 / Curator p50; dlock p99 " + std::to_string(*hand.p99_us) + " us";
        std::vector<bench::result> rs{floor, lib, cur, hand, chand};
        if (json) {
            for (auto& r : rs)
                bench::print_json(r, *floor.p50_us);
        } else {
            std::printf("dlock zk_bench: 3-server ZooKeeper ensemble on 127.0.0.1, every client on the "
                        "follower %s, raw cycle p50 %.1f us\n\n",
                        z.connect.c_str(), *floor.p50_us);
            bench::print_table(rs);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "zk_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
