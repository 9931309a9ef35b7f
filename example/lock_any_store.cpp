// SPDX-License-Identifier: BSL-1.0
// The same lock on any store: the URL picks the store, the rest of the program is the same.
// Two registries (as two processes would) take turns on one name: the second is refused while
// the first holds it, and gets a higher fencing token after the release.
// Usage: lock_any_store [URL]   (else $DLOCK_URL, else redis://127.0.0.1:6379), e.g.
//   redis://h:6379  etcd://a:2379,b:2379  zk://a:2181  postgresql://u:pw@h/db
//   mariadb://u:pw@h/db  memcached://h:11211
// Exit status: 0 all checks passed, 1 a check failed or the store is unreachable, 2 bad URL.
#include <dlock/dlock.hpp>  // the core and Redis; each other store has a header and a library
#ifdef DLOCK_HAS_ETCD       // defined by linking dlock::etcd (CMake) or by pkg-config's dlock-etcd
#include <dlock/etcd.hpp>
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
#ifdef DLOCK_HAS_MEMCACHED
#include <dlock/memcached.hpp>
#endif

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

// Every store's parse_url refuses another store's URL with error::unsupported_scheme, so the
// first parser that does not is the store's. `why` is set if the URL is the store's but wrong.
template <class Store, class Config, class Error>
std::unique_ptr<dlock::store> open_as(bool (*parse)(std::string_view, Config&, Error&), std::string_view url,
                                      asio::any_io_executor ex, std::string& why)
{
    Config cfg;
    Error err;
    if (parse(url, cfg, err))
        return std::make_unique<Store>(ex, cfg);  // no I/O yet: the first operation connects
    if (err.code != dlock::error::unsupported_scheme)
        why = err.message;
    return nullptr;
}

std::unique_ptr<dlock::store> open_store(std::string_view url, asio::any_io_executor ex, std::string& why)
{
    std::unique_ptr<dlock::store> s = open_as<dlock::redis_store>(dlock::redis::parse_url, url, ex, why);
#ifdef DLOCK_HAS_ETCD
    if (!s && why.empty())
        s = open_as<dlock::etcd_store>(dlock::etcd::parse_url, url, ex, why);
#endif
#ifdef DLOCK_HAS_ZOOKEEPER
    if (!s && why.empty())
        s = open_as<dlock::zookeeper_store>(dlock::zookeeper::parse_url, url, ex, why);
#endif
#ifdef DLOCK_HAS_POSTGRES
    if (!s && why.empty())
        s = open_as<dlock::postgres_store>(dlock::postgres::parse_url, url, ex, why);
#endif
#ifdef DLOCK_HAS_MARIADB
    if (!s && why.empty())
        s = open_as<dlock::mariadb_store>(dlock::mariadb::parse_url, url, ex, why);
#endif
#ifdef DLOCK_HAS_MEMCACHED
    if (!s && why.empty())
        s = open_as<dlock::memcached_store>(dlock::memcached::parse_url, url, ex, why);
#endif
    if (!s && why.empty())
        why = "no store of this build takes the URL '" + std::string(url.substr(0, url.find("://"))) + "://...'";
    return s;
}

void check(bool ok, const char* what)
{
    if (!ok)
        throw std::runtime_error(std::string("check failed: ") + what);
}

// Only the store contract from here on: this coroutine is the same for every store.
asio::awaitable<void> take_turns(dlock::store& store)
{
    co_await store.async_connect();  // fails at once if the store is unreachable or refuses us
    dlock::registry first(store);    // two registries: two owners, as two processes would be
    dlock::registry second(store);
    const std::string name = "orders:42";

    auto g1 = co_await first.obtain(name).acquire();
    const auto token1 = g1.fencing_token();  // a released guard is empty: keep the token
    std::cout << "first holds " << name << " with fencing token " << token1 << std::endl;

    auto refused = co_await second.obtain(name).try_acquire();  // one attempt: empty guard if taken
    check(!refused, "the second owner got the lock while the first held it");
    std::cout << "second is refused while first holds it" << std::endl;

    co_await g1.release();                                    // throws lock_lost if the lease had ended
    auto g2 = co_await second.obtain(name).acquire_for(10s);  // free now; error::timeout after 10 s
    const auto token2 = g2.fencing_token();
    std::cout << "second holds " << name << " with fencing token " << token2 << std::endl;
    check(token2 > token1, "fencing tokens increase from one holder to the next");
    co_await g2.release();
}

}  // namespace

int main(int argc, char** argv)
{
    const char* env = std::getenv("DLOCK_URL");
    std::string url = argc > 1 ? argv[1] : env ? env : "redis://127.0.0.1:6379";
    asio::io_context io;
    std::string why;
    auto store = open_store(url, io.get_executor(), why);
    if (!store) {
        std::cerr << "lock_any_store: " << why << '\n';
        return 2;
    }
    std::cout << "store: " << store->describe() << std::endl;  // passwords are never shown
    int status = -1;                                           // -1: still running
    asio::co_spawn(io, take_turns(*store), [&](std::exception_ptr e) {
        status = 0;
        if (e)
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& x) {
                std::cerr << "lock_any_store: " << x.what() << '\n';
                status = 1;
            }
        store->close();  // nothing left to do: io.run_for() returns
    });
    io.run_for(std::chrono::seconds(30));  // a demo never hangs, even if the store does not answer
    if (status < 0) {
        std::cerr << "lock_any_store: not done within 30 s\n";
        store->close();  // what is still waiting completes with error::closed
        io.restart();
        io.run_for(std::chrono::seconds(5));
        return 1;
    }
    if (status == 0)
        std::cout << "ok" << std::endl;
    return status;
}
