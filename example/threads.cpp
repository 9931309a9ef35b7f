// SPDX-License-Identifier: BSL-1.0
// dlock in a program whose io_context runs on 4 threads (docs/threading.md): the store and
// everything made from it live on one strand; requests run on strands of their own and hop to
// the store's strand for their locked section; main, not running the io_context, waits for a
// section with use_future.
// Usage: threads [URL]   (else $DLOCK_URL, else redis://127.0.0.1:6379)
// Exit status: 0 all checks passed, 1 a check failed or Redis is unreachable, 2 bad URL.
#include <dlock/dlock.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <future>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

using strand = asio::strand<asio::io_context::executor_type>;

void check(bool ok, const char* what)
{
    if (!ok)
        throw std::runtime_error(std::string("check failed: ") + what);
}

struct shared {
    strand dlock_strand;  // the store's executor
    dlock::registry& locks;
    std::map<std::string, std::uint64_t> last_token;  // per name; used on the store's strand only
};

// The locked section: on the store's strand, where every dlock call of the program is made.
asio::awaitable<std::uint64_t> section(shared& s, std::string name)
{
    check(s.dlock_strand.running_in_this_thread(), "the section runs on the store's strand");
    auto g = co_await s.locks.obtain(name).acquire_for(10s);
    const auto token = g.fencing_token();
    // Same-process waiters get the lease by local hand-off and share its token: never lower.
    check(token >= s.last_token[name], "fencing tokens of a name never go back");
    s.last_token[name] = token;
    co_await g.release();
    co_return token;
}

// A request on its own strand: hops to the store's strand for the section and comes back.
asio::awaitable<void> request(shared& s, strand own, int i)
{
    co_await asio::co_spawn(s.dlock_strand, section(s, "account:" + std::to_string(i % 4)), asio::use_awaitable);
    check(own.running_in_this_thread(), "the request resumes on its own strand");
}

}  // namespace

int main(int argc, char** argv)
{
    const char* env = std::getenv("DLOCK_URL");
    dlock::redis::config cfg;
    dlock::redis::config_error err;
    if (!dlock::redis::parse_url(argc > 1 ? argv[1] : env ? env : "redis://127.0.0.1:6379", cfg, err)) {
        std::cerr << "threads: " << err.message << '\n';
        return 2;
    }
    asio::io_context io(4);
    auto dlock_strand = asio::make_strand(io);
    dlock::redis_store store(dlock_strand, cfg);  // its sockets, timers and completions: on the strand
    dlock::registry locks(store);
    shared s{dlock_strand, locks, {}};
    auto work = asio::make_work_guard(io);  // run() goes on while main waits, even with nothing queued

    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i)
        threads.emplace_back([&] { io.run(); });
    auto stop = [&] {
        asio::post(dlock_strand, [&] { store.close(); });  // close() is a call on the store: on its strand
        work.reset();
        for (auto& t : threads)
            t.join();
    };

    // main runs no handler of io, so it may block on a future, for work started on the
    // store's strand (store.async_connect(asio::use_future) called from here would race with
    // the strand): fail fast if Redis is unreachable.
    auto connected = asio::co_spawn(
        dlock_strand, [&]() -> asio::awaitable<void> { co_await store.async_connect(); }, asio::use_future);
    try {
        if (connected.wait_for(30s) != std::future_status::ready)
            throw std::runtime_error("no connection within 30 s");
        connected.get();  // rethrows the connection's error
    } catch (const std::exception& x) {
        std::cerr << "threads: " << x.what() << '\n';
        stop();
        return 1;
    }

    constexpr int requests = 40;
    std::atomic<int> left{requests}, failed{0};
    std::promise<void> all_done;  // set by the last request to finish
    for (int i = 0; i < requests; ++i) {
        auto own = asio::make_strand(io);
        asio::co_spawn(own, request(s, own, i), [&](std::exception_ptr e) {
            if (e) {
                try {
                    std::rethrow_exception(e);
                } catch (const std::exception& x) {
                    std::cerr << "threads: request: " << x.what() << '\n';
                }
                ++failed;
            }
            if (--left == 0)
                all_done.set_value();
        });
    }

    int status = 1;
    if (all_done.get_future().wait_for(30s) != std::future_status::ready) {
        std::cerr << "threads: requests not done within 30 s\n";
    } else if (failed == 0) {
        std::cout << requests << " requests done on 4 threads" << std::endl;
        // A locked section for main, on the store's strand, waited for with a future.
        auto token = asio::co_spawn(dlock_strand, section(s, "account:0"), asio::use_future);
        if (token.wait_for(30s) != std::future_status::ready) {
            std::cerr << "threads: main's section not done within 30 s\n";
        } else {
            try {
                std::cout << "main waited for fencing token " << token.get() << std::endl;
                status = 0;
            } catch (const std::exception& x) {
                std::cerr << "threads: main: " << x.what() << '\n';
            }
        }
    }
    stop();
    if (status == 0)
        std::cout << "ok" << std::endl;
    return status;
}
