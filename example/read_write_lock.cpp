// SPDX-License-Identifier: BSL-1.0
// Read-write lock: many readers at once, or one writer. Two registries stand for two processes.
// Usage: read_write_lock [URL]   (else $DLOCK_URL, else redis://127.0.0.1:6379)
// Stores: Redis (one node or Sentinel, with scripting); others fail with error::not_supported.
// Exit status: 0 all checks passed, 1 a check failed or Redis is unreachable, 2 bad URL.
#include <dlock/dlock.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

void check(bool ok, const char* what)
{
    if (!ok)
        throw std::runtime_error(std::string("check failed: ") + what);
}

asio::awaitable<void> run(dlock::redis_store& store, dlock::registry& here, dlock::registry& there)
{
    co_await store.async_connect();  // fails at once if Redis is unreachable
    auto doc = here.obtain_rw("doc:42");
    auto doc_there = there.obtain_rw("doc:42");  // the same lock, seen from "another process"

    // Readers share: the second one gets in while the first holds it.
    auto r1 = co_await doc.read().acquire();
    auto r2 = co_await doc_there.read().try_acquire();  // one attempt: an empty guard if it would wait
    check(r2.owns_lock(), "a second reader gets in beside the first");
    std::cout << "two readers hold doc:42 (tokens " << r1.fencing_token() << ", " << r2.fencing_token() << ")"
              << std::endl;

    // A writer needs it alone.
    auto early = co_await doc_there.write().try_acquire();
    check(!early, "no writer while readers hold the lock");
    const auto last_reader_token = std::max(r1.fencing_token(), r2.fencing_token());  // a released guard is empty
    co_await r1.release();
    co_await r2.release();
    auto w = co_await doc_there.write().acquire_for(10s);  // error::timeout after 10 s
    std::cout << "the writer holds doc:42 (token " << w.fencing_token() << ")" << std::endl;
    check(w.fencing_token() > last_reader_token, "the writer's fencing token is higher than the readers'");

    auto late = co_await doc.read().try_acquire();
    check(!late, "no reader while the writer holds the lock");
    co_await w.release();
}

}  // namespace

int main(int argc, char** argv)
{
    const char* env = std::getenv("DLOCK_URL");
    dlock::redis::config cfg;
    dlock::redis::config_error err;
    if (!dlock::redis::parse_url(argc > 1 ? argv[1] : env ? env : "redis://127.0.0.1:6379", cfg, err)) {
        std::cerr << "read_write_lock: " << err.message << '\n';
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
                std::cerr << "read_write_lock: " << x.what() << '\n';
                status = 1;
            }
        store.close();  // nothing left to do: io.run_for() returns
    });
    io.run_for(30s);  // a demo never hangs
    if (status < 0) {
        std::cerr << "read_write_lock: not done within 30 s\n";
        store.close();  // what still waits completes with error::closed, before the registries go
        io.restart();
        io.run_for(5s);
        return 1;
    }
    if (status == 0)
        std::cout << "ok" << std::endl;
    return status;
}
