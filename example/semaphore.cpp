// SPDX-License-Identifier: BSL-1.0
// Semaphore: at most N holders of a name at once, across processes. Two registries stand for
// two processes.
// Usage: semaphore [URL]   (else $DLOCK_URL, else redis://127.0.0.1:6379)
// Stores: Redis (one node or Sentinel, with scripting); others fail with error::not_supported.
// Exit status: 0 all checks passed, 1 a check failed or Redis is unreachable, 2 bad URL.
#include <dlock/dlock.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <string>

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;  // a && b: run both, wait for both
using namespace std::chrono_literals;

namespace {

void check(bool ok, const char* what)
{
    if (!ok)
        throw std::runtime_error(std::string("check failed: ") + what);
}

// A job that needs one of the pool's permits: counts how many jobs run at once.
asio::awaitable<void> job(dlock::semaphore pool, int& running, int& most)
{
    co_await pool.run([&](dlock::guard&) -> asio::awaitable<void> {  // acquire, run, release
        most = std::max(most, ++running);
        asio::steady_timer work(co_await asio::this_coro::executor, 50ms);  // stands for real work
        co_await work.async_wait(asio::use_awaitable);
        --running;
    });
}

asio::awaitable<void> run(dlock::redis_store& store, dlock::registry& here, dlock::registry& there)
{
    co_await store.async_connect();                      // fails at once if Redis is unreachable
    auto gpus = here.obtain_semaphore("gpu", 2);         // at most 2 holders, across every process
    auto gpus_there = there.obtain_semaphore("gpu", 2);  // the same semaphore from "another process"

    auto p1 = co_await gpus.acquire();
    auto p2 = co_await gpus_there.acquire();
    std::cout << "two permits held (tokens " << p1.fencing_token() << ", " << p2.fencing_token() << ")" << std::endl;
    auto p3 = co_await gpus_there.try_acquire();  // one attempt: an empty guard if none is free
    check(!p3, "no third permit while two are held");
    co_await p1.release();
    p3 = co_await gpus_there.acquire_for(10s);  // the released permit; error::timeout after 10 s
    check(p3.owns_lock(), "a released permit can be taken again");
    co_await p2.release();
    co_await p3.release();

    // Five jobs from both "processes" share the two permits.
    int running = 0, most = 0;
    co_await (job(gpus, running, most) && job(gpus_there, running, most) && job(gpus, running, most) &&
              job(gpus_there, running, most) && job(gpus, running, most));
    std::cout << "5 jobs done, at most " << most << " at once" << std::endl;
    check(most <= 2, "never more jobs at once than permits");
}

}  // namespace

int main(int argc, char** argv)
{
    const char* env = std::getenv("DLOCK_URL");
    dlock::redis::config cfg;
    dlock::redis::config_error err;
    if (!dlock::redis::parse_url(argc > 1 ? argv[1] : env ? env : "redis://127.0.0.1:6379", cfg, err)) {
        std::cerr << "semaphore: " << err.message << '\n';
        return 2;
    }
    asio::io_context io;
    dlock::redis_store store(io.get_executor(), cfg);
    dlock::registry here(store);
    dlock::registry there(store);
    int status = -1;  // -1: still running
    asio::co_spawn(io, run(store, here, there), [&](std::exception_ptr e) {
        status = 0;
        if (e)
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& x) {
                std::cerr << "semaphore: " << x.what() << '\n';
                status = 1;
            }
        store.close();  // nothing left to do: io.run_for() returns
    });
    io.run_for(30s);  // a demo never hangs
    if (status < 0) {
        std::cerr << "semaphore: not done within 30 s\n";
        store.close();  // what still waits completes with error::closed, before the registries go
        io.restart();
        io.run_for(5s);
        return 1;
    }
    if (status == 0)
        std::cout << "ok" << std::endl;
    return status;
}
