// SPDX-License-Identifier: BSL-1.0
// Leader election: two candidates, one leader at a time, an observer that follows who leads.
// (leader_election.cpp is a longer program: a periodic job across processes, built on a mutex.)
// Usage: election [URL]   (else $DLOCK_URL, else redis://127.0.0.1:6379)
// Stores: Redis (one node or Sentinel, with scripting); others fail with error::not_supported.
// Exit status: 0 all checks passed, 1 a check failed or Redis is unreachable, 2 bad URL.
#include <dlock/dlock.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

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

// Candidate A steps down; returns the first leader the observer sees after it.
asio::awaitable<dlock::leader_info> step_down(dlock::leadership& a, dlock::leader_observer& watch)
{
    const auto term = a.term();  // a leadership that resigned is empty: keep its term
    co_await a.resign();         // releases the name: the next candidate takes over
    for (;;) {
        auto now = co_await watch.async_next(asio::use_awaitable);  // each change, in order
        if (now.present && now.term != term)
            co_return now;
        std::cout << "observer: " << (now.present ? "leader " + now.value : std::string("no leader")) << std::endl;
    }
}

asio::awaitable<void> run(dlock::redis_store& store, dlock::registry& reg_a, dlock::registry& reg_b)
{
    co_await store.async_connect();         // fails at once if Redis is unreachable
    dlock::election a(reg_a, "scheduler");  // two candidates, as two processes would be
    dlock::election b(reg_b, "scheduler");

    auto la = co_await a.campaign("host-a:8080");  // waits to lead, then proclaims its value
    check(la.is_leader(), "A leads");
    const auto term_a = la.term();  // the lease's fencing token: pass it to what the leader writes
    std::cout << "A leads, term " << term_a << std::endl;

    auto watch = a.observe();  // anyone can follow the leader: first the current one, then each change
    auto first = co_await watch.async_next();
    check(first.present && first.value == "host-a:8080" && first.term == term_a, "the observer sees A");

    // B campaigns while A leads; A steps down; B takes over with a higher term.
    auto [lb, seen] = co_await (b.campaign("host-b:8080", asio::use_awaitable) && step_down(la, watch));
    std::cout << "B leads, term " << lb.term() << "; observer: leader " << seen.value << std::endl;
    check(lb.is_leader() && lb.term() > term_a, "B leads with a higher term");
    check(seen.value == "host-b:8080" && seen.term == lb.term(), "the observer sees B");
    co_await lb.resign();
}

}  // namespace

int main(int argc, char** argv)
{
    const char* env = std::getenv("DLOCK_URL");
    dlock::redis::config cfg;
    dlock::redis::config_error err;
    if (!dlock::redis::parse_url(argc > 1 ? argv[1] : env ? env : "redis://127.0.0.1:6379", cfg, err)) {
        std::cerr << "election: " << err.message << '\n';
        return 2;
    }
    asio::io_context io;
    dlock::redis_store store(io.get_executor(), cfg);
    dlock::registry reg_a(store);
    dlock::registry reg_b(store);
    int status = -1;  // -1: still running
    asio::co_spawn(io, run(store, reg_a, reg_b), [&](std::exception_ptr e) {
        status = 0;
        if (e)
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& x) {
                std::cerr << "election: " << x.what() << '\n';
                status = 1;
            }
        store.close();  // nothing left to do: io.run_for() returns
    });
    io.run_for(30s);  // a demo never hangs
    if (status < 0) {
        std::cerr << "election: not done within 30 s\n";
        store.close();  // what still waits completes with error::closed, before the registries go
        io.restart();
        io.run_for(5s);
        return 1;
    }
    if (status == 0)
        std::cout << "ok" << std::endl;
    return status;
}
