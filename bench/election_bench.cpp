// SPDX-License-Identifier: BSL-1.0
/*
 * An election's hand-over against the same store's mutex hand-off, measured in the same run,
 * on each store with elections (bench/stores.hpp: a throwaway redis-server, a 3-master Redis
 * Cluster, a 3-member etcd cluster, a 3-server ZooKeeper ensemble, PostgreSQL, MariaDB; a
 * store whose elections() is null is skipped with a note). Two stores in one process stand
 * for two processes (each its own connections, session and lease):
 *   <store>_mutex_handoff      A holds, B waits (queued at the store): A's release call →
 *                              B's acquire completes
 *   <store>_election_handover  A leads, B campaigns (queued): A's resign call → B's campaign
 *                              completes (B leads and has proclaimed); ratio to the mutex's
 *   <store>_observer_sees_it   the same resign → an observer on A's store reads B's value;
 *                              ratio to the mutex's hand-off
 * Options: --json, --quick, --smoke (tiny counts, seconds: what ctest runs), --store NAME
 * (redis, cluster, etcd, zookeeper, postgres or mariadb; default: every store built).
 */
#include <dlock/dlock.hpp>

#include "common.hpp"
#include "stores.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using bench::clock_type;

namespace {

using bench::store_factory;

struct samples {
    std::vector<double> mutex, election, observer;
};

// The store's view of `name` until someone is queued behind its holder (bounded: 10 s).
asio::awaitable<void> until_queued(dlock::store& st, const std::string& name)
{
    asio::steady_timer t(co_await asio::this_coro::executor);
    for (int i = 0; i < 10000; ++i) {
        auto s = co_await st.async_status(name, asio::use_awaitable);
        if (s.queued > 0)
            co_return;
        t.expires_after(1ms);
        co_await t.async_wait(asio::use_awaitable);
    }
    throw std::runtime_error("the waiter never queued at the store");
}

// Runs `body` to its end on `io` (a bounded run: 300 s), rethrowing its exception.
void run(asio::io_context& io, std::function<asio::awaitable<void>()> body)
{
    std::exception_ptr error;
    bool done = false;
    asio::co_spawn(io, body(), [&](std::exception_ptr e) {
        error = e;
        done = true;
    });
    io.run_for(300s);
    if (error)
        std::rethrow_exception(error);
    if (!done)
        throw std::runtime_error("the run did not finish within 300 s");
}

samples measure(const store_factory& make, int rounds)
{
    asio::io_context io;
    auto a_st = make(io), b_st = make(io);
    dlock::registry a(*a_st, {.lease = 5s}), b(*b_st, {.lease = 5s});
    samples out;
    std::exception_ptr failure;  // of a waiter's coroutine
    auto keep = [&](std::exception_ptr e) {
        if (e && !failure)
            failure = e;
    };
    // Until `flag` is set by a waiter's completion (which took the time itself).
    auto until = [&](std::optional<clock_type::time_point>& flag) -> asio::awaitable<void> {
        asio::steady_timer t(co_await asio::this_coro::executor);
        while (!flag && !failure) {
            t.expires_after(100us);
            co_await t.async_wait(asio::use_awaitable);
        }
        if (failure)
            std::rethrow_exception(failure);
    };
    run(io, [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        for (int i = 0; i < rounds; ++i) {
            // The mutex: B's acquire completes after A's release.
            auto ga = co_await a.obtain("m").acquire(asio::use_awaitable);
            std::optional<clock_type::time_point> got;
            dlock::guard gb;
            auto take = [&]() -> asio::awaitable<void> {
                gb = co_await b.obtain("m").acquire(asio::use_awaitable);
                got = clock_type::now();
            };
            asio::co_spawn(ex, take(), keep);
            co_await until_queued(*a_st, "dlock:m");
            auto t0 = clock_type::now();
            co_await ga.release(asio::use_awaitable);
            co_await until(got);
            out.mutex.push_back(std::chrono::duration<double, std::micro>(*got - t0).count());
            co_await gb.release(asio::use_awaitable);

            // The election: B's campaign completes after A resigns; A's observer reads B.
            dlock::election ea(a, "e"), eb(b, "e");
            auto la = co_await ea.campaign("a", asio::use_awaitable);
            auto obs = ea.observe();
            auto first = co_await obs.async_next(asio::use_awaitable);
            if (first.value != "a")
                throw std::runtime_error("the observer did not read A as leader");
            std::optional<clock_type::time_point> led;
            dlock::leadership lb;
            auto campaign = [&]() -> asio::awaitable<void> {
                lb = co_await eb.campaign("b", asio::use_awaitable);
                led = clock_type::now();
            };
            asio::co_spawn(ex, campaign(), keep);
            co_await until_queued(*a_st, "dlock:e");
            t0 = clock_type::now();
            co_await la.resign(asio::use_awaitable);
            dlock::leader_info seen;
            while (seen.value != "b")
                seen = co_await obs.async_next(asio::use_awaitable);
            auto observed = clock_type::now();
            co_await until(led);
            out.election.push_back(std::chrono::duration<double, std::micro>(*led - t0).count());
            out.observer.push_back(std::chrono::duration<double, std::micro>(observed - t0).count());
            co_await lb.resign(asio::use_awaitable);
        }
        co_await a.async_drain(asio::use_awaitable);
        co_await b.async_drain(asio::use_awaitable);
        a_st->close();
        b_st->close();
    });
    return out;
}

// Whether the store keeps elections (a store made only to ask; it does no I/O).
bool serves_elections(const store_factory& make)
{
    asio::io_context io;
    auto st = make(io);
    bool yes = st->elections() != nullptr;
    st->close();
    return yes;
}

void report(const std::string& store, const samples& s, std::vector<bench::result>& rs)
{
    auto mx = bench::summarize(store + "_mutex_handoff", s.mutex);
    mx.note = "release call -> the queued waiter's acquire completes";
    rs.push_back(mx);
    auto el = bench::summarize(store + "_election_handover", s.election);
    el.ratio = *el.p50_us / *mx.p50_us;
    el.note = "resign call -> the queued candidate leads (proclaimed); ratio to the mutex";
    rs.push_back(el);
    auto ob = bench::summarize(store + "_observer_sees_it", s.observer);
    ob.ratio = *ob.p50_us / *mx.p50_us;
    ob.note = "resign call -> an observer reads the new value; ratio to the mutex";
    rs.push_back(ob);
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
            std::printf("usage: election_bench [--json] [--quick | --smoke] [--store %s]\n",
                        bench::store_names().c_str());
            return a == "--help" ? 0 : 2;
        }
    }
    int rounds = bench::by_size(size, 200, 50, 3);
    try {
        std::vector<bench::result> rs;
        if (!only.empty() && !bench::is_built(only))
            throw std::runtime_error("no such store built: " + only + " (built: " + bench::store_names(", ") + ")");
        for (const auto& row : bench::stores_built()) {
            if (!only.empty() && only != row.name)
                continue;
            auto site = row.start();
            if (!serves_elections(site.make)) {
                std::fprintf(stderr, "%s: no elections (store::elections() is null): skipped\n", row.name);
                continue;
            }
            report(row.name, measure(site.make, rounds), rs);
        }
        if (as_json) {
            for (auto& r : rs)
                bench::print_json(r, 0);
        } else {
            bench::print_table(rs);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "election_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
