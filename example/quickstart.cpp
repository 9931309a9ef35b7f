// SPDX-License-Identifier: BSL-1.0
// Quick start: take a distributed lock held in Redis, print its fencing token, release it.
// Usage: quickstart [URL]   (else $DLOCK_URL, else redis://127.0.0.1:6379)
#include <dlock/dlock.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdlib>
#include <exception>
#include <iostream>

namespace asio = boost::asio;

asio::awaitable<void> run(dlock::redis_store& store, dlock::registry& locks)
{
    co_await store.connection().async_connect();                 // fails at once if Redis is unreachable
    auto lock = locks.obtain("orders:42");                       // same name, same lock, in every process
    auto g = co_await lock.acquire();                            // waits without polling
    std::cout << "fencing token " << g.fencing_token() << '\n';  // pass it to your storage
    co_await g.release();                                        // throws lock_lost if the lease had ended
    store.close();                                               // nothing left to do: io.run() returns
}

int main(int argc, char** argv)
{
    const char* env = std::getenv("DLOCK_URL");
    dlock::redis::config cfg;
    dlock::redis::config_error err;
    if (!dlock::redis::parse_url(argc > 1 ? argv[1] : env ? env : "redis://127.0.0.1:6379", cfg, err)) {
        std::cerr << "quickstart: " << err.message << '\n';
        return 2;
    }
    asio::io_context io;
    dlock::redis_store store(io.get_executor(), cfg);  // one command + one pub/sub connection
    dlock::registry locks(store);                      // 30 s leases, renewed while held
    int status = -1;                                   // -1: still running
    asio::co_spawn(io, run(store, locks), [&](std::exception_ptr e) {
        status = 0;
        if (e)
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& x) {
                std::cerr << "quickstart: " << x.what() << '\n';
                status = 1;
                store.close();
            }
    });
    io.run_for(std::chrono::seconds(30));  // a demo never hangs, even if the lock stays taken
    if (status < 0)
        std::cerr << "quickstart: no lock within 30 s\n";
    return status < 0 ? 1 : status;
}
