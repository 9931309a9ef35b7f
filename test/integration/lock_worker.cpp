// SPDX-License-Identifier: BSL-1.0
// A separate process for the multi-process lock tests. Modes:
//   count PORT NAME COROUTINES SECTIONS COUNTER_FILE LOG_FILE
//       each coroutine runs SECTIONS critical sections: read the counter file, yield,
//       write it back + 1, append "pid token" to the log. Prints "done <stats json>".
//   hold PORT NAME LEASE_MS [read|write|permits=N]
//       acquires (a mutex, a side of a read-write lock, or one of N permits), prints
//       "acquired TOKEN", then works until the lease is lost (or 60 s), prints
//       "lost=0|1 token=TOKEN".
//   sections PORT NAME read|write|permits=N COROUTINES SECTIONS HOLD_MS LOG_FILE
//       each coroutine runs SECTIONS sections of HOLD_MS on that primitive, appending
//       "B KIND pid token" after acquiring and "E KIND pid token" before releasing (KIND: r,
//       w or p); one write() per line on an O_APPEND file, so the file's order is the order
//       in which sections began and ended. Prints "done <stats>".
// PORT is a port on 127.0.0.1 (redis_store), or a comma-separated list of URLs
// (redis://127.0.0.1:P1,redis://127.0.0.1:P2,...) for a redlock_store over those nodes,
// or a redis+sentinel:// URL for a redis_store that finds its master through Sentinel,
// or cluster:PORT for a cluster_store seeded with the cluster node on 127.0.0.1:PORT,
// or an etcd:// URL for an etcd_store,
// or a zk:// URL for a zookeeper_store,
// or a memcached:// URL for a memcached_store (leases of 2 s: whole seconds),
// or a postgresql:// URL for a postgres_store,
// or a mariadb:// (mysql://) URL for a mariadb_store,
// or noscript:redis://[user:pw@]127.0.0.1:P for a redis_store without Lua (WATCH/MULTI/EXEC).
#include <dlock/dlock.hpp>
#ifdef DLOCK_HAS_ETCD
#include <dlock/etcd.hpp>
#endif
#ifdef DLOCK_HAS_MEMCACHED
#include <dlock/memcached.hpp>
#endif
#ifdef DLOCK_HAS_ZOOKEEPER
#include <dlock/zookeeper.hpp>
#endif
#ifdef DLOCK_HAS_POSTGRES
#include <dlock/postgres.hpp>
#endif
#ifdef DLOCK_HAS_MARIADB
#include <dlock/mariadb.hpp>
#endif

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

// A worker coroutine's end: an exception (a failed acquire or release) is said on stderr, so
// that a test that sees the worker fail can show why.
void report_failure(std::exception_ptr e)
{
    if (!e)
        return;
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& x) {
        std::cerr << "worker coroutine failed: " << x.what() << std::endl;
    }
}

long read_counter(const std::string& path)
{
    FILE* f = std::fopen(path.c_str(), "r");
    long v = 0;
    if (f) {
        if (std::fscanf(f, "%ld", &v) != 1)
            v = 0;
        std::fclose(f);
    }
    return v;
}

void write_counter(const std::string& path, long v)
{
    FILE* f = std::fopen(path.c_str(), "w");
    std::fprintf(f, "%ld\n", v);
    std::fclose(f);
}

}  // namespace

int main(int argc, char** argv)
{
    if (argc < 4) {
        std::cerr << "usage: lock_worker MODE PORT NAME ...\n";
        return 2;
    }
    std::string mode = argv[1];
    std::string name = argv[3];
    asio::io_context io;
    std::unique_ptr<dlock::store> store_ptr;
    std::function<void()> close_store;
#ifdef DLOCK_HAS_ETCD
    if (std::string_view(argv[2]).rfind("etcd://", 0) == 0) {
        // etcd://...: an etcd_store over those members.
        dlock::etcd::config cfg;
        dlock::etcd::config_error err;
        if (!dlock::etcd::parse_url(argv[2], cfg, err)) {
            std::cerr << "lock_worker: " << err.message << "\n";
            return 2;
        }
        auto es = std::make_unique<dlock::etcd_store>(io.get_executor(), cfg);
        close_store = [s = es.get()] { s->close(); };
        store_ptr = std::move(es);
    } else
#endif
#ifdef DLOCK_HAS_ZOOKEEPER
        if (std::string_view(argv[2]).rfind("zk://", 0) == 0) {
        dlock::zookeeper::config cfg;
        dlock::zookeeper::config_error err;
        if (!dlock::zookeeper::parse_url(argv[2], cfg, err)) {
            std::cerr << "lock_worker: " << err.message << "\n";
            return 2;
        }
        auto zs = std::make_unique<dlock::zookeeper_store>(io.get_executor(), cfg);
        close_store = [s = zs.get()] { s->close(); };
        store_ptr = std::move(zs);
    } else
#endif
#ifdef DLOCK_HAS_MEMCACHED
        if (std::string_view(argv[2]).rfind("memcached://", 0) == 0) {
        dlock::memcached::config cfg;
        dlock::memcached::config_error err;
        if (!dlock::memcached::parse_url(argv[2], cfg, err)) {
            std::cerr << "lock_worker: " << err.message << "\n";
            return 2;
        }
        auto ms = std::make_unique<dlock::memcached_store>(io.get_executor(), cfg);
        close_store = [s = ms.get()] { s->close(); };
        store_ptr = std::move(ms);
    } else
#endif
#ifdef DLOCK_HAS_POSTGRES
        if (std::string_view(argv[2]).rfind("postgresql://", 0) == 0 ||
            std::string_view(argv[2]).rfind("postgres://", 0) == 0) {
        dlock::postgres::config cfg;
        dlock::postgres::config_error err;
        if (!dlock::postgres::parse_url(argv[2], cfg, err)) {
            std::cerr << "lock_worker: " << err.message << "\n";
            return 2;
        }
        auto ps = std::make_unique<dlock::postgres_store>(io.get_executor(), cfg);
        close_store = [s = ps.get()] { s->close(); };
        store_ptr = std::move(ps);
    } else
#endif
#ifdef DLOCK_HAS_MARIADB
        if (std::string_view(argv[2]).rfind("mariadb://", 0) == 0 ||
            std::string_view(argv[2]).rfind("mysql://", 0) == 0) {
        dlock::mariadb::config cfg;
        dlock::mariadb::config_error err;
        if (!dlock::mariadb::parse_url(argv[2], cfg, err)) {
            std::cerr << "lock_worker: " << err.message << "\n";
            return 2;
        }
        auto ms = std::make_unique<dlock::mariadb_store>(io.get_executor(), cfg);
        close_store = [s = ms.get()] { s->close(); };
        store_ptr = std::move(ms);
    } else
#endif
        if (std::string_view(argv[2]).rfind("noscript:", 0) == 0) {
        // noscript:URL: a redis_store in the no-scripting mode.
        dlock::redis::config cfg;
        dlock::redis::config_error err;
        if (!dlock::redis::parse_url(std::string(argv[2]).substr(9), cfg, err)) {
            std::cerr << "lock_worker: " << err.message << "\n";
            return 2;
        }
        auto rs = std::make_unique<dlock::redis_store>(io.get_executor(), cfg,
                                                       dlock::redis_store_options{.scripting = false});
        close_store = [s = rs.get()] { s->close(); };
        store_ptr = std::move(rs);
    } else if (std::string_view(argv[2]).rfind("cluster:", 0) == 0) {
        // cluster:PORT: a cluster_store seeded with one node on 127.0.0.1.
        dlock::redis::config seed;
        seed.port = static_cast<std::uint16_t>(std::stoi(std::string(argv[2]).substr(8)));
        auto cs = std::make_unique<dlock::cluster_store>(io.get_executor(), seed);
        close_store = [s = cs.get()] { s->close(); };
        store_ptr = std::move(cs);
    } else if (std::string_view(argv[2]).rfind("redis+sentinel://", 0) == 0) {
        // Sentinel: one redis_store that finds the master through the sentinels.
        dlock::redis::config cfg;
        dlock::redis::config_error err;
        if (!dlock::redis::parse_url(argv[2], cfg, err)) {
            std::cerr << "lock_worker: " << err.message << "\n";
            return 2;
        }
        auto rs = std::make_unique<dlock::redis_store>(io.get_executor(), cfg);
        close_store = [s = rs.get()] { s->close(); };
        store_ptr = std::move(rs);
    } else if (std::string_view(argv[2]).find(',') != std::string_view::npos) {
        std::vector<dlock::redis::config> nodes;
        dlock::redis::config_error err;
        if (!dlock::parse_node_list(argv[2], nodes, err)) {
            std::cerr << "lock_worker: " << err.message << "\n";
            return 2;
        }
        auto rl = std::make_unique<dlock::redlock_store>(io.get_executor(), std::move(nodes));
        close_store = [s = rl.get()] { s->close(); };
        store_ptr = std::move(rl);
    } else {
        dlock::redis::config cfg;
        cfg.port = static_cast<std::uint16_t>(std::stoi(argv[2]));
        auto rs = std::make_unique<dlock::redis_store>(io.get_executor(), cfg);
        close_store = [s = rs.get()] { s->close(); };
        store_ptr = std::move(rs);
    }
    dlock::store& store = *store_ptr;
    int status = 1;

    if (mode == "count" && argc >= 8) {
        int coroutines = std::stoi(argv[4]);
        int sections = std::stoi(argv[5]);
        std::string counter = argv[6];
        int log = ::open(argv[7], O_WRONLY | O_APPEND | O_CREAT, 0644);
        // Whole-second stores sleep on the holder's remaining lease: keep it short there.
        dlock::registry reg(store, {.lease = store.traits().ttl_granularity >= 1s ? 2s : 5s});
        int finished = 0;
        std::string pid = std::to_string(::getpid());
        auto start = [&] {
            for (int c = 0; c < coroutines; ++c) {
                asio::co_spawn(
                    io,
                    [&]() -> asio::awaitable<void> {
                        auto lock = reg.obtain(name);
                        for (int i = 0; i < sections; ++i) {
                            auto g = co_await lock.acquire();
                            long v = read_counter(counter);
                            co_await asio::post(io, asio::use_awaitable);  // let others run mid-section
                            write_counter(counter, v + 1);
                            std::string line = pid + " " + std::to_string(g.fencing_token()) + "\n";
                            if (::write(log, line.data(), line.size()) < 0)
                                std::abort();
                            co_await g.release();
                        }
                        if (++finished == coroutines) {
                            close_store();
                        }
                    },
                    report_failure);
            }
        };
        // "wait_start": say "ready", then start at SIGUSR1, so that processes started one
        // after another contend from the same instant (a test that needs them to overlap).
        std::optional<asio::signal_set> start_signal;
        if (argc >= 9 && std::string_view(argv[8]) == "wait_start") {
            start_signal.emplace(io, SIGUSR1);
            start_signal->async_wait([&](boost::system::error_code ec, int) {
                if (!ec)
                    start();
            });
            std::cout << "ready" << std::endl;
        } else {
            start();
        }
        io.run();
        const auto& s = reg.stats();
        std::cout << "done acquired=" << s.acquired << " handed_off=" << s.handed_off << " yielded=" << s.yielded
                  << " contended=" << s.contended << " by_notification=" << s.woken_by_notification
                  << " by_timer=" << s.woken_by_timer << " store_handoffs=" << s.store_handoffs << " lost=" << s.lost
                  << std::endl;
        status = finished == coroutines ? 0 : 1;
    } else if (mode == "sections" && argc >= 9) {
        std::string what = argv[4];
        int coroutines = std::stoi(argv[5]);
        int sections = std::stoi(argv[6]);
        auto hold = std::chrono::milliseconds(std::stoi(argv[7]));
        int log = ::open(argv[8], O_WRONLY | O_APPEND | O_CREAT, 0644);
        dlock::registry reg(store, {.lease = 5s});
        int finished = 0;
        std::string pid = std::to_string(::getpid());
        char kind = what == "read" ? 'r' : what == "write" ? 'w' : 'p';
        auto acquire = [&, rw = reg.obtain_rw(name),
                        sem = kind == 'p' ? reg.obtain_semaphore(name, std::stoi(what.substr(8)))
                                          : dlock::semaphore()]() mutable -> asio::awaitable<dlock::guard> {
            if (kind == 'p')
                co_return co_await sem.acquire();
            co_return co_await (kind == 'r' ? rw.read() : rw.write()).acquire();
        };
        auto put = [&](char phase, std::uint64_t token) {
            std::string line = std::string(1, phase) + " " + kind + " " + pid + " " + std::to_string(token) + "\n";
            if (::write(log, line.data(), line.size()) < 0)
                std::abort();
        };
        for (int c = 0; c < coroutines; ++c) {
            asio::co_spawn(
                io,
                [&]() -> asio::awaitable<void> {
                    asio::steady_timer t(io);
                    for (int i = 0; i < sections; ++i) {
                        auto g = co_await acquire();
                        put('B', g.fencing_token());
                        t.expires_after(hold);
                        co_await t.async_wait(asio::use_awaitable);
                        put('E', g.fencing_token());
                        co_await g.release();
                    }
                    if (++finished == coroutines) {
                        // A read lease lingers a turn after its last reader: its release is
                        // still to go out, and the store must not close under it.
                        boost::system::error_code ec;
                        co_await reg.async_drain(asio::redirect_error(asio::use_awaitable, ec));
                        close_store();
                    }
                },
                report_failure);
        }
        io.run();
        const auto& s = reg.stats();
        std::cout << "done acquired=" << s.acquired << " handed_off=" << s.handed_off
                  << " store_handoffs=" << s.store_handoffs << " lost=" << s.lost << std::endl;
        status = finished == coroutines ? 0 : 1;
    } else if (mode == "hold" && argc >= 5) {
        auto lease = std::chrono::milliseconds(std::stoi(argv[4]));
        std::string what = argc >= 6 ? argv[5] : "mutex";
        dlock::registry reg(store, {.lease = lease});
        asio::co_spawn(
            io,
            [&]() -> asio::awaitable<void> {
                dlock::guard g;
                if (what == "read" || what == "write") {
                    auto rw = reg.obtain_rw(name);
                    g = co_await (what == "read" ? rw.read() : rw.write()).acquire();
                } else if (what.rfind("permits=", 0) == 0) {
                    g = co_await reg.obtain_semaphore(name, std::stoi(what.substr(8))).acquire();
                } else {
                    g = co_await reg.obtain(name).acquire();
                }
                std::cout << "acquired " << g.fencing_token() << std::endl;
                asio::steady_timer work(io, 60s);
                boost::system::error_code ec;
                co_await work.async_wait(
                    asio::bind_cancellation_slot(g.lost_slot(), asio::redirect_error(asio::use_awaitable, ec)));
                std::cout << "lost=" << (g.is_lost() ? 1 : 0) << " token=" << g.fencing_token() << std::endl;
                co_await g.release(asio::redirect_error(asio::use_awaitable, ec));
                close_store();
                status = 0;
            },
            asio::detached);
        io.run();
    } else {
        std::cerr << "lock_worker: bad arguments\n";
        return 2;
    }
    return status;
}
