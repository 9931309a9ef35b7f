// SPDX-License-Identifier: BSL-1.0
/*
 * mariadb_bench: what mariadb_store costs, as ratios to the same statements sent raw in the
 * same run.
 *
 * One throwaway MariaDB (test/common/mariadb_server) on a free loopback port; the cases:
 *   raw_select1_rtt               SELECT 1 over the blocking client library: the round trip
 *   raw_cycle_floor               the store's own acquire then release statements (sql.hpp),
 *                                 sent with the blocking client library: the floor
 *   uncontended_acquire_release   one coroutine, one name, through dlock; ratio to the floor
 *                                 (in blocks of 100 interleaved with the floor's)
 *   raw_handoff_floor             two blocking connections: B waits in GET_LOCK on A's signal
 *                                 lock, A releases, B acquires; from A's release sent to B's
 *                                 acquire answered
 *   handoff                       the same through two mariadb_stores (two registries, their
 *                                 own connections): B's acquire pending, A's guard released
 *                                 -> B's acquire completes; ratio to the raw hand-off
 * Options: --json (one JSON object per line), --quick (fewer samples), --smoke (tiny counts,
 * seconds: what ctest runs).
 * Timeouts: each phase runs under io_context::run_for (120 s), only to turn a bug into an
 * error instead of a hang; the lease is 30 s so the watchdog never interferes.
 */
#include <dlock/dlock.hpp>
#include <dlock/mariadb.hpp>

#include "common.hpp"
#include "common/mariadb_server.hpp"
#include "mariadb/sql.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <mysql.h>

#include <atomic>
#include <iostream>
#include <thread>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using bench::clock_type;
using dlock::test::mariadb_server;
namespace sql = dlock::mariadb::sql;

namespace {

// A blocking Connector/C connection: the raw floor (no Asio, no dlock).
class raw_conn {
public:
    explicit raw_conn(const dlock::mariadb::config& c) : m_(mysql_init(nullptr))
    {
        if (!mysql_real_connect(m_, c.host.c_str(), c.user.c_str(), c.password.c_str(), c.database.c_str(), c.port,
                                nullptr, CLIENT_MULTI_STATEMENTS))
            throw std::runtime_error(std::string("raw connect: ") + mysql_error(m_));
        run(sql::session_setup());
    }
    ~raw_conn() { mysql_close(m_); }
    raw_conn(const raw_conn&) = delete;
    raw_conn& operator=(const raw_conn&) = delete;

    /// Runs a multi-statement query; returns the first column of the first row of the first set.
    std::string run(const std::string& q)
    {
        if (mysql_real_query(m_, q.data(), q.size()) != 0)
            throw std::runtime_error(std::string("raw query: ") + mysql_error(m_));
        std::string first;
        bool have = false;
        for (;;) {
            if (MYSQL_RES* r = mysql_store_result(m_)) {
                if (MYSQL_ROW row = mysql_fetch_row(r); row && !have && row[0]) {
                    first = row[0];
                    have = true;
                }
                mysql_free_result(r);
            } else if (mysql_field_count(m_) != 0) {
                throw std::runtime_error(std::string("raw result: ") + mysql_error(m_));
            }
            int rc = mysql_next_result(m_);
            if (rc > 0)
                throw std::runtime_error(std::string("raw next: ") + mysql_error(m_));
            if (rc < 0)
                break;
        }
        return first;
    }

private:
    MYSQL* m_;
};

const std::string table = "dlock_locks";

std::vector<double> raw_rtt(raw_conn& c, int n)
{
    std::vector<double> lat;
    for (int i = 0; i < n; ++i) {
        auto t0 = clock_type::now();
        c.run("SELECT 1");
        lat.push_back(bench::us_since(t0));
    }
    return lat;
}

void raw_cycle(raw_conn& c, int n, std::vector<double>& lat)
{
    for (int i = 0; i < n; ++i) {
        auto token = "raw:" + std::to_string(lat.size());
        auto t0 = clock_type::now();
        if (c.run(sql::acquire(table, "bench:raw", token, 30s)) != "1")
            throw std::runtime_error("raw acquire refused");
        c.run(sql::release(table, "bench:raw", token));
        lat.push_back(bench::us_since(t0));
    }
}

std::vector<double> raw_handoff(const dlock::mariadb::config& cfg, int n)
{
    raw_conn a(cfg), b(cfg), bw(cfg);
    std::vector<double> lat;
    for (int i = 0; i < n; ++i) {
        auto ta = "a:" + std::to_string(i), tb = "b:" + std::to_string(i);
        a.run(sql::acquire(table, "bench:rawh", ta, 30s));
        std::atomic<bool> waiting{false};
        clock_type::time_point released{}, got{};
        std::thread waiter([&] {
            if (b.run(sql::acquire(table, "bench:rawh", tb, 30s)) == "1")
                throw std::runtime_error("raw hand-off: b took a held name");
            waiting = true;
            bw.run(sql::wait(table, "bench:rawh", 30s));
            if (b.run(sql::acquire(table, "bench:rawh", tb, 30s)) != "1")
                std::abort();
            got = clock_type::now();
        });
        while (!waiting)
            std::this_thread::yield();
        std::this_thread::sleep_for(2ms);  // b's GET_LOCK reaches the server
        released = clock_type::now();
        a.run(sql::release(table, "bench:rawh", ta));
        waiter.join();
        lat.push_back(std::chrono::duration<double, std::micro>(got - released).count());
        b.run(sql::release(table, "bench:rawh", tb));
    }
    return lat;
}

void uncontended(asio::io_context& io, dlock::lock& lock, int n, std::vector<double>& lat)
{
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            for (int i = 0; i < n; ++i) {
                auto t0 = clock_type::now();
                auto g = co_await lock.acquire();
                co_await g.release();
                lat.push_back(bench::us_since(t0));
            }
        },
        asio::detached);
    io.restart();
    io.run_for(120s);
}

std::vector<double> handoff(asio::io_context& io, dlock::mariadb_store& sa, dlock::mariadb_store& sb, int n)
{
    dlock::registry ra(sa, {.lease = 30s}), rb(sb, {.lease = 30s});
    std::vector<double> lat;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            auto la = ra.obtain("bench:handoff"), lb = rb.obtain("bench:handoff");
            asio::steady_timer t(io);
            for (int i = 0; i < n; ++i) {
                auto g = co_await la.acquire();
                clock_type::time_point released{}, got{};
                bool done = false;
                asio::co_spawn(
                    io,
                    [&]() -> asio::awaitable<void> {
                        auto g2 = co_await lb.acquire();
                        got = clock_type::now();
                        done = true;
                        co_await g2.release();
                    },
                    asio::detached);
                t.expires_after(20ms);  // b refused, watching, its GET_LOCK at the server
                co_await t.async_wait(asio::use_awaitable);
                released = clock_type::now();
                co_await g.release();
                while (!done) {
                    t.expires_after(100us);
                    co_await t.async_wait(asio::use_awaitable);
                }
                lat.push_back(std::chrono::duration<double, std::micro>(got - released).count());
                t.expires_after(2ms);  // b's release
                co_await t.async_wait(asio::use_awaitable);
            }
        },
        asio::detached);
    io.restart();
    io.run_for(120s);
    return lat;
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
    const int samples = bench::by_size(size, 3000, 300, 100), handoffs = bench::by_size(size, 200, 40, 5);
    try {
        mariadb_server srv;
        auto cfg = srv.config();
        asio::io_context io;
        dlock::mariadb_store st(io.get_executor(), cfg), sb(io.get_executor(), cfg);
        // Creates the table first (the raw connections run no schema setup).
        st.async_connect([](boost::system::error_code ec) {
            if (ec)
                throw std::runtime_error("connect: " + ec.message());
        });
        io.run_for(30s);
        raw_conn raw(cfg);
        auto rtt = bench::summarize("raw_select1_rtt", raw_rtt(raw, samples));
        // Blocks of 100 raw cycles interleaved with blocks of 100 through dlock: both see the
        // same machine (other builds come and go on a shared one).
        dlock::registry reg(st, {.lease = 30s});
        auto lock = reg.obtain("bench:solo");
        std::vector<double> raw_lat, lib_lat;
        uncontended(io, lock, 10, lib_lat);  // connect, warm up
        raw_cycle(raw, 10, raw_lat);
        raw_lat.clear();
        lib_lat.clear();
        for (int done = 0; done < samples; done += 100) {
            raw_cycle(raw, 100, raw_lat);
            uncontended(io, lock, 100, lib_lat);
        }
        auto floor = bench::summarize("raw_cycle_floor", raw_lat);
        floor.ratio = *floor.p50_us / *rtt.p50_us;
        floor.note = "ratio = p50 / RTT";
        auto lib = bench::summarize("uncontended_acquire_release", lib_lat);
        lib.ratio = *lib.p50_us / *floor.p50_us;
        lib.note = "ratio = p50 / raw_cycle_floor p50";
        auto rawh = bench::summarize("raw_handoff_floor", raw_handoff(cfg, handoffs));
        rawh.ratio = *rawh.p50_us / *rtt.p50_us;
        rawh.note = "ratio = p50 / RTT";
        auto hand = bench::summarize("handoff", handoff(io, st, sb, handoffs));
        hand.ratio = *hand.p50_us / *rawh.p50_us;
        hand.note = "ratio = p50 / raw_handoff_floor p50";
        std::vector<bench::result> rs{rtt, floor, lib, rawh, hand};
        if (json) {
            for (auto& r : rs)
                bench::print_json(r, *rtt.p50_us);
        } else {
            std::printf("dlock mariadb_bench: one MariaDB on 127.0.0.1, SELECT 1 p50 %.1f us\n\n", *rtt.p50_us);
            bench::print_table(rs);
        }
        st.close();
        sb.close();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "mariadb_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
