// SPDX-License-Identifier: BSL-1.0
// A separate process for the latch (and election) integration tests, on a redis_store at
// 127.0.0.1:PORT, or on the store of a zk://, etcd://, postgresql:// or mariadb:// URL given
// for PORT. Modes:
//   count_down PORT NAME COUNT MEMBER   counts down for MEMBER ("-": a library-made member),
//                                       prints "remaining N"
//   wait PORT NAME COUNT                waits for the latch, then prints "woken remaining=N"
//   campaign PORT NAME LEASE_MS LOG ID TICKS ROUNDS
//       ROUNDS times: campaigns with value ID, prints "leader ID TERM", then every 10 ms,
//       while still leader by its own account, appends "TERM ID" to LOG; after TICKS lines
//       (0: never) resigns and prints "resigned TERM"; on loss prints "lost TERM".
#include <dlock/dlock.hpp>
#ifdef DLOCK_HAS_ZOOKEEPER
#include <dlock/zookeeper.hpp>
#endif
#ifdef DLOCK_HAS_ETCD
#include <dlock/etcd.hpp>
#endif
#ifdef DLOCK_HAS_POSTGRES
#include <dlock/postgres.hpp>
#endif
#ifdef DLOCK_HAS_MARIADB
#include <dlock/mariadb.hpp>
#endif

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

// A Redis port, or a ZooKeeper, etcd, PostgreSQL or MariaDB URL.
std::unique_ptr<dlock::store> make_store(asio::io_context& io, const std::string& where)
{
#ifdef DLOCK_HAS_ZOOKEEPER
    if (where.rfind("zk://", 0) == 0) {
        dlock::zookeeper::config cfg;
        dlock::zookeeper::config_error err;
        if (!dlock::zookeeper::parse_url(where, cfg, err))
            throw std::runtime_error(err.message);
        return std::make_unique<dlock::zookeeper_store>(io.get_executor(), cfg);
    }
#endif
#ifdef DLOCK_HAS_ETCD
    if (where.rfind("etcd://", 0) == 0) {
        dlock::etcd::config cfg;
        dlock::etcd::config_error err;
        if (!dlock::etcd::parse_url(where, cfg, err))
            throw std::runtime_error(err.message);
        return std::make_unique<dlock::etcd_store>(io.get_executor(), cfg);
    }
#endif
#ifdef DLOCK_HAS_POSTGRES
    if (where.rfind("postgresql://", 0) == 0) {
        dlock::postgres::config cfg;
        dlock::postgres::config_error err;
        if (!dlock::postgres::parse_url(where, cfg, err))
            throw std::runtime_error(err.message);
        return std::make_unique<dlock::postgres_store>(io.get_executor(), cfg);
    }
#endif
#ifdef DLOCK_HAS_MARIADB
    if (where.rfind("mariadb://", 0) == 0) {
        dlock::mariadb::config cfg;
        dlock::mariadb::config_error err;
        if (!dlock::mariadb::parse_url(where, cfg, err))
            throw std::runtime_error(err.message);
        return std::make_unique<dlock::mariadb_store>(io.get_executor(), cfg);
    }
#endif
    dlock::redis::config cfg;
    cfg.port = static_cast<std::uint16_t>(std::stoi(where));
    return std::make_unique<dlock::redis_store>(io.get_executor(), cfg);
}

void say(const std::string& line)
{
    std::cout << line << std::endl;  // flushed: the test reads it line by line
}

}  // namespace

int main(int argc, char** argv)
{
    if (argc < 5) {
        std::cerr << "usage: latch_worker MODE PORT NAME ...\n";
        return 2;
    }
    std::string mode = argv[1];
    std::string name = argv[3];
    asio::io_context io;
    auto store_ptr = make_store(io, argv[2]);
    dlock::store& store = *store_ptr;
    // Campaigns set the lease; latches ignore it.
    auto lease = mode == "campaign" && argc >= 5 ? std::chrono::milliseconds(std::stoll(argv[4])) : 2000ms;
    dlock::registry reg(store, {.lease = lease});
    int status = 1;

    auto run = [&](auto body) {
        asio::co_spawn(io, body(), [&](std::exception_ptr e) {
            if (e) {
                try {
                    std::rethrow_exception(e);
                } catch (const std::exception& ex) {
                    say(std::string("error ") + ex.what());
                }
            } else {
                status = 0;
            }
            store.close();
        });
        io.run();
    };

    if (mode == "count_down" && argc >= 6) {
        std::uint64_t count = std::stoull(argv[4]);
        std::string member = argv[5];
        run([&]() -> asio::awaitable<void> {
            dlock::latch l(reg, name, count);
            auto left = member == "-" ? co_await l.count_down(asio::use_awaitable)
                                      : co_await l.count_down(member, asio::use_awaitable);
            say("remaining " + std::to_string(left));
        });
    } else if (mode == "wait") {
        std::uint64_t count = std::stoull(argv[4]);
        run([&]() -> asio::awaitable<void> {
            dlock::latch l(reg, name, count);
            co_await l.wait(asio::use_awaitable);
            auto left = co_await l.count(asio::use_awaitable);
            say("woken remaining=" + std::to_string(left));
        });
    } else if (mode == "campaign" && argc >= 9) {
        int log = ::open(argv[5], O_WRONLY | O_APPEND | O_CREAT, 0644);
        std::string id = argv[6];
        int ticks = std::stoi(argv[7]), rounds = std::stoi(argv[8]);
        run([&]() -> asio::awaitable<void> {
            dlock::election e(reg, name);
            asio::steady_timer t(io);
            for (int r = 0; r < rounds; ++r) {
                auto l = co_await e.campaign(id, asio::use_awaitable);
                auto term = std::to_string(l.term());
                say("leader " + id + " " + term);
                for (int i = 0; ticks == 0 || i < ticks; ++i) {
                    // By its own account, right before the side effect: never after valid_until().
                    if (!l.is_leader())
                        break;
                    auto line = term + " " + id + "\n";
                    if (::write(log, line.data(), line.size()) < 0)
                        throw std::runtime_error("log write failed");
                    t.expires_after(10ms);
                    co_await t.async_wait(asio::use_awaitable);
                }
                if (l.is_leader()) {
                    co_await l.resign(asio::use_awaitable);
                    say("resigned " + term);
                } else {
                    say("lost " + term);
                }
            }
            ::close(log);
        });
    } else {
        std::cerr << "latch_worker: unknown mode or missing arguments\n";
        return 2;
    }
    return status;
}
