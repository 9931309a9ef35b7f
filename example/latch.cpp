// SPDX-License-Identifier: BSL-1.0
// Count-down latch: a coordinator waits until 3 workers (any processes) have counted down.
// Usage: latch [URL]   (else $DLOCK_URL, else redis://127.0.0.1:6379)
// Stores: Redis (one node or Sentinel, with scripting); others fail with error::not_supported.
// Exit status: 0 all checks passed, 1 a check failed or Redis is unreachable, 2 bad URL.
#include <dlock/dlock.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <random>
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

asio::awaitable<void> run(dlock::redis_store& store, dlock::registry& reg)
{
    co_await store.async_connect();  // fails at once if Redis is unreachable
    // A latch lives at the store (a day by default) after its last count-down, so a name used
    // once per batch: here, one per run.
    const std::string name = "batch-" + std::to_string(std::random_device()());
    dlock::latch done(reg, name, 3);  // the same name and count in every process

    bool woke = false;
    auto coordinator = [&]() -> asio::awaitable<void> {
        co_await done.wait_for(10s, asio::use_awaitable);  // woken by the last count-down; error::timeout
        woke = true;
    };
    auto workers = [&]() -> asio::awaitable<void> {
        for (int i = 1; i <= 3; ++i) {
            const std::string member = "worker-" + std::to_string(i);
            auto left = co_await done.count_down(member);  // each member counts once, even when retried:
            if (i == 1)
                check(co_await done.count_down(member) == left, "a repeated count-down counts once");
            std::cout << member << " counted down, " << left << " left" << std::endl;
            check(left == std::uint64_t(3 - i), "each member counts one");
            if (i < 3)
                check(!woke, "the coordinator waits for the last member");
        }
    };
    co_await (coordinator() && workers());
    check(woke, "the coordinator woke");
    check(co_await done.count() == 0, "the latch is done");
    std::cout << "the coordinator saw all 3 workers" << std::endl;
}

}  // namespace

int main(int argc, char** argv)
{
    const char* env = std::getenv("DLOCK_URL");
    dlock::redis::config cfg;
    dlock::redis::config_error err;
    if (!dlock::redis::parse_url(argc > 1 ? argv[1] : env ? env : "redis://127.0.0.1:6379", cfg, err)) {
        std::cerr << "latch: " << err.message << '\n';
        return 2;
    }
    asio::io_context io;
    dlock::redis_store store(io.get_executor(), cfg);
    dlock::registry reg(store);
    int status = -1;  // -1: still running
    asio::co_spawn(io, run(store, reg), [&](std::exception_ptr e) {
        status = 0;
        if (e)
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& x) {
                std::cerr << "latch: " << x.what() << '\n';
                status = 1;
            }
        store.close();  // nothing left to do: io.run_for() returns
    });
    io.run_for(30s);  // a demo never hangs
    if (status < 0) {
        std::cerr << "latch: not done within 30 s\n";
        store.close();  // what still waits completes with error::closed, before the registries go
        io.restart();
        io.run_for(5s);
        return 1;
    }
    if (status == 0)
        std::cout << "ok" << std::endl;
    return status;
}
