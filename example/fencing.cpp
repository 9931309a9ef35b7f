// SPDX-License-Identifier: BSL-1.0
/*
 * fencing: why a lease alone cannot protect storage, and how fencing tokens do.
 *
 * Holder A takes the lock "fencing-demo" with a fixed 300 ms lease (watchdog off) and writes
 * to a toy storage. Then A stalls for 900 ms, standing in for a GC pause or a stopped VM: its
 * lease ends while it is not looking. Meanwhile holder B (think: another process) gets the
 * lock with a higher fencing token and writes. When A wakes up it still believes it holds the
 * lock and writes again: the storage, which remembers the highest token it has seen, rejects
 * that late write. A's release() then reports dlock::error::lock_lost.
 *
 * Usage: fencing [--url URL]   (else $DLOCK_URL, else redis://127.0.0.1:6379)
 * Exits 0 only if the late write was rejected and A learned of its loss; 1 otherwise,
 * 2 on bad arguments.
 * Timeouts: B waits for the lock at most 5 s (A's lease is 300 ms); the run is capped at 20 s.
 */
#include <dlock/dlock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <string_view>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;

namespace {

constexpr auto lease = 300ms;
constexpr auto pause = 3 * lease;
constexpr std::string_view lock_name = "fencing-demo";

// The protected resource: it remembers the highest token it has accepted and refuses older
// ones. Equal tokens pass: one lease may write many times.
class storage {
public:
    bool write(std::uint64_t token, const std::string& value)
    {
        if (token < highest_)
            return false;
        highest_ = token;
        value_ = value;
        return true;
    }
    const std::string& value() const noexcept { return value_; }

private:
    std::uint64_t highest_ = 0;
    std::string value_;
};

void report_write(std::string_view who, std::uint64_t token, bool accepted)
{
    std::cout << who << " writes with token " << token << ": " << (accepted ? "accepted" : "rejected (stale token)")
              << std::endl;
}

// B: another holder of the same lock. Waiting ends when A's lease ends (woken by the key's
// remaining time to live, not by polling).
asio::awaitable<std::uint64_t> holder_b(dlock::registry& locks, storage& db)
{
    auto g = co_await locks.obtain(lock_name).acquire_for(5s);
    const auto token = g.fencing_token();  // a released guard is empty: keep the token
    std::cout << "B acquired token " << token << std::endl;
    report_write("B", token, db.write(token, "written by B"));
    co_await g.release();
    co_return token;
}

asio::awaitable<bool> demo(dlock::registry& locks_a, dlock::registry& locks_b, storage& db)
{
    auto g = co_await locks_a.obtain(lock_name).acquire();
    const auto token_a = g.fencing_token();
    std::cout << "A acquired token " << token_a << " (lease " << lease.count() << " ms, no watchdog)" << std::endl;
    report_write("A", token_a, db.write(token_a, "written by A"));

    // A stalls past its lease. We also wait for B to finish so that the story is the same on
    // a loaded machine; the timer's error is a value so that `&&` never sees two exceptions.
    std::cout << "A pauses for " << pause.count() << " ms" << std::endl;
    asio::steady_timer gc_pause(co_await asio::this_coro::executor, pause);
    boost::system::error_code ignored;
    auto token_b =
        co_await (gc_pause.async_wait(asio::redirect_error(asio::use_awaitable, ignored)) && holder_b(locks_b, db));

    // A careful holder checks is_lost() before writing, but a pause can strike between that
    // check and the write: only the storage's token check closes the gap.
    std::cout << "A wakes up (is_lost() = " << std::boolalpha << g.is_lost() << ") and writes anyway" << std::endl;
    bool late_accepted = db.write(token_a, "late write by A");
    report_write("A", token_a, late_accepted);

    auto [ec] = co_await g.release(asio::as_tuple(asio::use_awaitable));
    std::cout << "A release: " << (ec ? ec.message() : "ok") << std::endl;
    std::cout << "storage holds: " << db.value() << std::endl;
    co_return token_b > token_a && !late_accepted && ec == dlock::error::lock_lost;
}

}  // namespace

int main(int argc, char** argv)
{
    const char* env = std::getenv("DLOCK_URL");
    std::string url = env ? env : "redis://127.0.0.1:6379";
    for (int i = 1; i < argc; ++i) {
        std::string_view arg = argv[i];
        if (arg == "--url" && i + 1 < argc) {
            url = argv[++i];
        } else {
            std::cerr << "fencing: unknown argument " << arg << " (usage: fencing [--url URL])\n";
            return 2;
        }
    }
    dlock::redis::config cfg;
    dlock::redis::config_error err;
    if (!dlock::redis::parse_url(url, cfg, err)) {
        std::cerr << "fencing: " << err.message << '\n';
        return 2;
    }

    asio::io_context io;
    // A and B stand for two processes: each has its own connections and registry.
    dlock::redis_store store_a(io.get_executor(), cfg), store_b(io.get_executor(), cfg);
    dlock::registry locks_a(store_a, {.lease = lease, .watchdog = false});
    dlock::registry locks_b(store_b, {.lease = 5s});
    storage db;
    int status = -1;  // -1: still running
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<bool> {
            // Fail fast with the reason if Redis is unreachable (acquire would keep retrying).
            co_await store_a.connection().async_connect();
            co_return co_await demo(locks_a, locks_b, db);
        },
        [&](std::exception_ptr e, bool fenced) {
            status = fenced ? 0 : 1;
            if (e)
                try {
                    std::rethrow_exception(e);
                } catch (const std::exception& x) {
                    std::cerr << "fencing: " << x.what() << '\n';
                    status = 1;
                }
            if (status == 0)
                std::cout << "the late write was rejected by its fencing token" << std::endl;
            store_a.close();
            store_b.close();
        });
    io.run_for(20s);
    if (status < 0)
        std::cerr << "fencing: did not finish within 20 s\n";
    return status < 0 ? 1 : status;
}
