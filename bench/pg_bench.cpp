// SPDX-License-Identifier: BSL-1.0
/*
 * pg_bench: what the lock costs on PostgreSQL, as ratios to figures measured in the same run.
 *
 * A throwaway PostgreSQL 15 (test/common/postgres_server: fsync off, loopback); the cases:
 *   raw_cycle_floor             the store's own acquire and release statements, sent raw with
 *                               plain libpq (blocking PQexecParams) on one connection, no
 *                               library (in blocks of 100 interleaved with the next case's)
 *   uncontended_acquire_release one coroutine, one name, through registry + postgres_store;
 *                               ratio to raw_cycle_floor
 *   raw_handoff_floor           the same hand-off without the library: a release statement on
 *                               one blocking connection until the NOTIFY is read on another
 *                               (LISTENing, its pid queued); ratio to raw_cycle_floor
 *   cross_process_handoff       two processes take turns (hold 3 ms, release, 1 ms pause): the
 *                               time from one's release call to the other's acquire, which the
 *                               release hands over (queue row, NOTIFY dlock_grant); ratio
 *                               to raw_handoff_floor
 * Options: --json (one JSON object per line), --quick (fewer samples), --smoke (tiny counts,
 * seconds: what ctest runs).
 * The peer process is this program started again with --peer.
 */
#include <dlock/dlock.hpp>
#include <dlock/postgres.hpp>

#include "common.hpp"
#include "common/child.hpp"
#include "common/postgres_server.hpp"
#include "postgres/sql.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <libpq-fe.h>
#include <sys/prctl.h>
#include <sys/select.h>

#include <iostream>
#include <sstream>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using bench::clock_type;
using bench::now_ns;

namespace {

// The raw floor: one blocking libpq connection sending the store's statements.
class raw_locker {
public:
    explicit raw_locker(const std::string& url) : pg_(PQconnectdb(url.c_str()))
    {
        if (PQstatus(pg_) != CONNECTION_OK)
            throw std::runtime_error(std::string("raw connect: ") + PQerrorMessage(pg_));
        st_ = dlock::postgres::sql::make_statements("dlock_locks");
        expect(PQexec(pg_, st_.setup.c_str()), PGRES_COMMAND_OK);
    }
    ~raw_locker() { PQfinish(pg_); }
    raw_locker(const raw_locker&) = delete;
    raw_locker& operator=(const raw_locker&) = delete;

    double cycle()
    {
        auto t0 = clock_type::now();
        const char* acq[] = {"bench:raw", "raw-token", "10000", "0"};
        PGresult* a = PQexecParams(pg_, st_.acquire.c_str(), 4, nullptr, acq, nullptr, nullptr, 0);
        bool ok = PQresultStatus(a) == PGRES_TUPLES_OK && PQntuples(a) == 1 && *PQgetvalue(a, 0, 0) == 't';
        PQclear(a);
        if (!ok)
            throw std::runtime_error(std::string("raw acquire failed: ") + PQerrorMessage(pg_));
        const char* rel[] = {"bench:raw", "raw-token"};
        PGresult* r = PQexecParams(pg_, st_.release.c_str(), 2, nullptr, rel, nullptr, nullptr, 0);
        ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && *PQgetvalue(r, 0, 0) == 't';
        PQclear(r);
        if (!ok)
            throw std::runtime_error(std::string("raw release failed: ") + PQerrorMessage(pg_));
        return bench::us_since(t0);
    }

private:
    void expect(PGresult* r, ExecStatusType want)
    {
        bool ok = PQresultStatus(r) == want;
        PQclear(r);
        if (!ok)
            throw std::runtime_error(std::string("raw setup: ") + PQerrorMessage(pg_));
    }

    PGconn* pg_;
    dlock::postgres::sql::statements st_;
};

// The raw hand-off floor: a holder's release hands the name to a waiter queued under the pid
// of a second connection that LISTENs; the time from the release's send to the NOTIFY read
// on the waiter's socket (both blocking, one thread, no library).
class raw_handoff {
public:
    explicit raw_handoff(const std::string& url) : a_(PQconnectdb(url.c_str())), b_(PQconnectdb(url.c_str()))
    {
        if (PQstatus(a_) != CONNECTION_OK || PQstatus(b_) != CONNECTION_OK)
            throw std::runtime_error("raw hand-off: connect failed");
        st_ = dlock::postgres::sql::make_statements("dlock_locks");
        PQclear(PQexec(a_, st_.setup.c_str()));
        PQclear(PQexec(b_, dlock::postgres::sql::listen().c_str()));
        pid_ = std::to_string(PQbackendPID(b_));
    }
    ~raw_handoff()
    {
        PQfinish(a_);
        PQfinish(b_);
    }
    raw_handoff(const raw_handoff&) = delete;
    raw_handoff& operator=(const raw_handoff&) = delete;

    double round(int i)
    {
        const std::string holder = "h" + std::to_string(i), waiter = "w" + std::to_string(i);
        if (!ask(st_.acquire, {"bench:rawho", holder.c_str(), "10000", "0"}))
            throw std::runtime_error("raw hand-off: holder did not get the name");
        if (ask(st_.acquire, {"bench:rawho", waiter.c_str(), "10000", pid_.c_str()}))
            throw std::runtime_error("raw hand-off: waiter got a held name");
        auto t0 = clock_type::now();
        ask(st_.release, {"bench:rawho", holder.c_str()});
        for (bool got = false; !got;) {
            fd_set fds;
            FD_ZERO(&fds);
            FD_SET(PQsocket(b_), &fds);
            timeval tv{5, 0};
            if (::select(PQsocket(b_) + 1, &fds, nullptr, nullptr, &tv) <= 0 || !PQconsumeInput(b_))
                throw std::runtime_error("raw hand-off: no notification");
            while (PGnotify* n = PQnotifies(b_)) {
                got = got || std::string(n->relname) == dlock::postgres::sql::grant_channel;
                PQfreemem(n);
            }
        }
        double us = bench::us_since(t0);
        ask(st_.release, {"bench:rawho", waiter.c_str()});
        return us;
    }

private:
    bool ask(const std::string& sql, std::vector<const char*> params)
    {
        PGresult* r =
            PQexecParams(a_, sql.c_str(), static_cast<int>(params.size()), nullptr, params.data(), nullptr, nullptr, 0);
        bool ok = PQresultStatus(r) == PGRES_TUPLES_OK;
        bool first = ok && PQntuples(r) == 1 && *PQgetvalue(r, 0, 0) == 't';
        PQclear(r);
        if (!ok)
            throw std::runtime_error(std::string("raw hand-off: ") + PQerrorMessage(a_));
        return first;
    }

    PGconn* a_;
    PGconn* b_;
    std::string pid_;
    dlock::postgres::sql::statements st_;
};

dlock::postgres::config config_of(const std::string& url)
{
    dlock::postgres::config c;
    dlock::postgres::config_error err;
    if (!dlock::postgres::parse_url(url, c, err))
        throw std::runtime_error(err.message);
    return c;
}

template <class Body>
void with_store(const std::string& url, Body body)
{
    asio::io_context io;
    dlock::postgres_store store(io.get_executor(), config_of(url));
    std::exception_ptr failure;
    bool done = false;
    asio::co_spawn(io, body(io, store), [&](std::exception_ptr e) {
        failure = e;
        done = true;
        store.close();
    });
    io.run_for(300s);  // only to turn a bug into an error instead of a hang
    if (failure)
        std::rethrow_exception(failure);
    if (!done)
        throw std::runtime_error("a bench phase did not finish in 300 s");
}

// Blocks of the raw floor and of the library alternate, so both see the same machine.
void uncontended(const std::string& url, int samples, std::vector<double>& raw, std::vector<double>& lib)
{
    raw_locker rl(url);
    with_store(url, [&](asio::io_context&, dlock::postgres_store& store) -> asio::awaitable<void> {
        dlock::registry reg(store, {.lease = 30s});
        auto lock = reg.obtain("bench:solo");
        for (int block = 0; block < samples / 100 + 2; ++block) {
            for (int i = 0; i < 100; ++i) {
                auto t0 = clock_type::now();
                auto g = co_await lock.acquire();
                co_await g.release();
                if (block >= 2)
                    lib.push_back(bench::us_since(t0));
            }
            for (int i = 0; i < 100; ++i) {
                auto us = rl.cycle();
                if (block >= 2)
                    raw.push_back(us);
            }
        }
    });
}

// Both sides run this: take the lock, hold it 3 ms, release, pause 1 ms; log the times. The
// lease is long so the watchdog never interferes; `handoffs` counts the store's grants.
std::string pingpong(const std::string& url, int rounds, std::uint64_t& store_handoffs)
{
    std::ostringstream out;
    with_store(url, [&](asio::io_context& io, dlock::postgres_store& store) -> asio::awaitable<void> {
        dlock::registry reg(store, {.lease = 30s});
        auto lock = reg.obtain("bench:pingpong");
        asio::steady_timer t(io);
        for (int i = 0; i < rounds; ++i) {
            auto g = co_await lock.acquire();
            out << "acq " << now_ns() << "\n";
            t.expires_after(3ms);
            co_await t.async_wait(asio::use_awaitable);
            out << "rel " << now_ns() << "\n";
            co_await g.release();
            t.expires_after(1ms);
            co_await t.async_wait(asio::use_awaitable);
        }
        store_handoffs = reg.stats().store_handoffs;
    });
    return out.str();
}

}  // namespace

int main(int argc, char** argv)
{
    ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    if (argc >= 4 && std::string(argv[1]) == "--peer") {
        std::uint64_t n = 0;
        auto log = pingpong(argv[2], std::atoi(argv[3]), n);
        std::cout << log << "end " << n << std::endl;
        return 0;
    }
    bool as_json = false;
    auto size = bench::run_size::full;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--json")
            as_json = true;
        else if (!bench::parse_run_size(a, size)) {
            std::printf("usage: pg_bench [--json] [--quick | --smoke]\n");
            return a == "--help" ? 0 : 2;
        }
    }
    try {
        dlock::test::postgres_server server;
        const auto url = server.url();
        int samples = bench::by_size(size, 2000, 300, 100);
        std::vector<bench::result> rs;
        std::vector<double> raw_us, lib_us;
        uncontended(url, samples, raw_us, lib_us);
        auto raw = bench::summarize("raw_cycle_floor", raw_us);
        raw.note = "the store's acquire and release statements, blocking PQexecParams, no library";
        rs.push_back(raw);
        auto solo = bench::summarize("uncontended_acquire_release", lib_us);
        solo.ratio = *solo.p50_us / *raw.p50_us;
        solo.note = "registry + postgres_store; ratio to raw_cycle_floor";
        rs.push_back(solo);

        std::vector<double> rawho_us;
        {
            raw_handoff rh(url);
            for (int i = 0; i < bench::by_size(size, 1000, 200, 20); ++i)
                rawho_us.push_back(rh.round(i));
        }
        auto rawho = bench::summarize("raw_handoff_floor", rawho_us);
        rawho.ratio = *rawho.p50_us / *raw.p50_us;
        rawho.note = "release statement -> NOTIFY read on the waiter's listening connection, blocking libpq";
        rs.push_back(rawho);

        int rounds = bench::by_size(size, 400, 100, 10);
        dlock::test::child peer({"/proc/self/exe", "--peer", url, std::to_string(rounds)});
        std::uint64_t mine_handoffs = 0, their_handoffs = 0;
        auto mine = pingpong(url, rounds, mine_handoffs);
        std::string theirs;
        while (auto l = peer.read_line(120s)) {
            if (l->rfind("end", 0) == 0) {
                their_handoffs = std::stoull(l->substr(4));
                break;
            }
            theirs += *l + "\n";
        }
        peer.wait();
        auto cross = bench::summarize("cross_process_handoff", bench::handoff_latencies(mine, theirs));
        cross.ratio = *cross.p50_us / *rawho.p50_us;
        cross.note = "release call in one process -> acquire done in the other; " +
                     std::to_string(mine_handoffs + their_handoffs) + " of " + std::to_string(2 * rounds) +
                     " acquires were store hand-offs; ratio to raw_handoff_floor";
        rs.push_back(cross);

        if (as_json) {
            for (auto& r : rs)
                bench::print_json(r, *raw.p50_us);
        } else {
            std::printf("dlock pg_bench: PostgreSQL 15 on 127.0.0.1 (fsync off), raw cycle p50 %.1f us\n\n",
                        *raw.p50_us);
            bench::print_table(rs);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "pg_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
