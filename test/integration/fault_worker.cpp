// SPDX-License-Identifier: BSL-1.0
// A worker of the fault runs: one coroutine that takes the lock NAME over and over until
// END_NS (CLOCK_MONOTONIC), holds it HOLD_MS (varied from 1/2 to 3/2 of it), and logs each
// section as test/common/fault_log.hpp describes. Store errors are expected while faults are
// injected: an acquire that fails is retried after a short pause, a release that fails is
// counted. The store comes from the dlock tool's own options (--url URL [--no-scripting]...).
//
//   dlock_fault_worker END_NS LEASE_MS HOLD_MS LOG_FILE NAME [tool options...]
//
// Prints "done sections=N lost=N errors=N" and exits 0 when END_NS has passed.
#include "cli/backend.hpp"
#include "cli/options.hpp"

#include <dlock/dlock.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

std::int64_t now_ns()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

}  // namespace

int main(int argc, char** argv)
{
    if (argc < 7) {
        std::cerr << "usage: dlock_fault_worker END_NS LEASE_MS HOLD_MS LOG_FILE NAME TOOL_OPTIONS...\n";
        return 2;
    }
    const std::int64_t end_ns = std::stoll(argv[1]);
    const auto lease = std::chrono::milliseconds(std::stoi(argv[2]));
    const int hold_ms = std::stoi(argv[3]);
    const int log = ::open(argv[4], O_WRONLY | O_APPEND | O_CREAT, 0644);
    const std::string name = argv[5];
    std::vector<std::string> args{"status"};
    args.insert(args.end(), argv + 6, argv + argc);
    args.push_back(name);
    dlock::cli::options o;
    dlock::cli::parse_error err;
    if (log < 0 || !dlock::cli::parse(
                                       args, o, err, [](const char*) -> const char* { return nullptr; },
                                       [](const std::string&, std::string&) { return false; })) {
        std::cerr << "dlock_fault_worker: " << (log < 0 ? "cannot open the log" : err.message) << "\n";
        return 2;
    }

    asio::io_context io;
    auto store = dlock::cli::open_store(o, io.get_executor());
    dlock::registry reg(*store, {.lease = lease});
    const std::string pid = std::to_string(::getpid());
    auto put = [&](const std::string& line) {
        if (::write(log, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
            std::abort();
    };
    std::size_t sections = 0, lost = 0, errors = 0;
    bool finished = false;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            auto lock = reg.obtain(name);
            asio::steady_timer t(io);
            std::minstd_rand rng(static_cast<unsigned>(::getpid()));
            while (now_ns() < end_ns) {
                boost::system::error_code ec;
                auto g = co_await lock.acquire_for(3 * lease, asio::redirect_error(asio::use_awaitable, ec));
                if (ec) {
                    ++errors;
                    // On stderr, for the test's output: what kept this worker out, and when.
                    auto st = reg.stats();
                    std::cerr << "fault worker " << pid << " at " << now_ns() << ": acquire failed: " << ec.message()
                              << " (store errors " << st.store_errors << ", contended " << st.contended
                              << ", woken by the store " << st.woken_by_notification << ", by timer "
                              << st.woken_by_timer << "; " << store->last_error_text() << ")" << std::endl;
                    t.expires_after(50ms);
                    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
                    continue;
                }
                const auto token = std::to_string(g.fencing_token());
                put("B " + pid + " " + token + " " + std::to_string(now_ns()) + "\n");
                ++sections;
                t.expires_after(std::chrono::milliseconds(hold_ms / 2 + static_cast<int>(rng() % (hold_ms + 1))));
                co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
                // The time first, then the verdict: held then if still held after it.
                const auto t_end = now_ns();
                const bool held = !g.is_lost();
                put("E " + pid + " " + token + " " + std::to_string(t_end) + (held ? " 1\n" : " 0\n"));
                lost += !held;
                co_await g.release(asio::redirect_error(asio::use_awaitable, ec));
                errors += ec && ec != dlock::error::lock_lost;
            }
            finished = true;
            boost::system::error_code ec;
            co_await reg.async_drain(asio::redirect_error(asio::use_awaitable, ec));
            store->close();
        },
        asio::detached);
    io.run();
    std::cout << "done sections=" << sections << " lost=" << lost << " errors=" << errors << std::endl;
    return finished ? 0 : 1;
}
