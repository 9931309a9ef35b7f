// SPDX-License-Identifier: BSL-1.0
/*
 * leader_election: one leader at a time among several processes, and a job that stops as
 * soon as leadership is lost.
 *
 * Run several instances with the same --url and --file. Each campaigns for the lock
 * "leader"; the one holding it runs a periodic job: every --period it appends
 * "ID TOKEN begin", and half a period later "ID TOKEN end", to --file. The lease's loss
 * (a pause longer than the lease, Redis losing the key) cancels the job at its next
 * co_await, and the job checks the lease's local deadline right before each write, so a
 * leader that was paused never writes after its lease ended. It then campaigns again.
 *
 * Usage: leader_election --file PATH [--url URL] [--id ID] [--lease 10s] [--period 1s]
 *                        [--rounds N] [--duration 60s]
 *   --url       else $DLOCK_URL, else redis://127.0.0.1:6379
 *   --id        this instance's name in the file (default: its pid)
 *   --lease     how long a crashed leader keeps the others waiting; renewed every lease/3
 *   --rounds    leave after leading this many rounds in all (0, the default: no limit)
 *   --duration  leave after this long, leader or not (caps every run; 0: no cap)
 * SIGINT / SIGTERM leave early; a leader finishes its round and releases the lock first.
 *
 * Output, one line per event (flushed, for scripts and tests):
 *   leader ID TOKEN     became leader
 *   lost ID TOKEN       the lease ended while leading: the job stopped
 *   round ID N          finished its N-th round as leader (counted over the whole run)
 *   resigned ID TOKEN   stopped leading on purpose; the lock is released
 *   done ID ROUNDS      exiting (status 0)
 * Errors: one line on stderr; status 1 (Redis unreachable, file not writable), 2 (bad flags).
 */
#include <dlock/dlock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <string_view>
#include <system_error>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

struct options {
    std::string url;
    std::string id = std::to_string(::getpid());
    std::string file;
    std::chrono::milliseconds lease{10s};
    std::chrono::milliseconds period{1s};
    std::chrono::milliseconds duration{60s};
    long rounds = 0;
};

// Leaving: cancels a follower's wait for the lock, and tells a leader's job to finish its round.
struct stop_request {
    asio::cancellation_signal signal;
    bool requested = false;

    void request()
    {
        if (!requested) {
            requested = true;
            signal.emit(asio::cancellation_type::terminal);
        }
    }
};

void say(std::string_view event, const options& o, std::uint64_t n)
{
    std::cout << event << ' ' << o.id << ' ' << n << std::endl;
}

// Appends one line with one write() (O_APPEND keeps lines whole across processes), unless
// the lease has ended: a pause (GC, SIGSTOP) can outlast the lease before the watchdog gets
// to run, so the local deadline is checked right before the side effect.
bool append(int fd, const dlock::guard& g, const std::string& line)
{
    if (clock_type::now() >= g.valid_until())
        return false;
    if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
        throw std::system_error(errno, std::generic_category(), "write");
    return true;
}

// The leader's job. Returns when asked to stop or when the lease has run out; the lease's
// loss also cancels it at its next co_await (it runs bound to the guard's lost_slot()).
asio::awaitable<void> job(const dlock::guard& g, const options& o, int fd, long& rounds, const stop_request& stop)
{
    asio::steady_timer timer(co_await asio::this_coro::executor);
    const std::string prefix = o.id + ' ' + std::to_string(g.fencing_token());
    while (!stop.requested && (o.rounds == 0 || rounds < o.rounds)) {
        if (!append(fd, g, prefix + " begin\n"))
            co_return;
        timer.expires_after(o.period / 2);  // the "work"
        co_await timer.async_wait(asio::use_awaitable);
        if (!append(fd, g, prefix + " end\n"))
            co_return;
        say("round", o, static_cast<std::uint64_t>(++rounds));
        timer.expires_after(o.period / 2);
        co_await timer.async_wait(asio::use_awaitable);
    }
}

asio::awaitable<long> campaign(dlock::redis_store& store, dlock::registry& locks, const options& o, int fd,
                               stop_request& stop)
{
    co_await store.connection().async_connect();  // fail fast if Redis is unreachable
    auto ex = co_await asio::this_coro::executor;
    auto lock = locks.obtain("leader");
    long rounds = 0;
    while (!stop.requested && (o.rounds == 0 || rounds < o.rounds)) {
        // Followers wait here, woken by the leader's release or its lease's end; leaving
        // cancels the wait (a cancelled acquire leaves nothing behind in Redis).
        auto [ec, g] = co_await lock.acquire(
            asio::bind_cancellation_slot(stop.signal.slot(), asio::as_tuple(asio::use_awaitable)));
        if (ec == asio::error::operation_aborted)
            break;
        if (ec)
            throw boost::system::system_error(ec, "acquire");
        const auto token = g.fencing_token();
        say("leader", o, token);

        // The job runs bound to the lease's loss: a lost lease cancels it at its next co_await.
        auto [failure] =
            co_await asio::co_spawn(ex, job(g, o, fd, rounds, stop),
                                    asio::bind_cancellation_slot(g.lost_slot(), asio::as_tuple(asio::use_awaitable)));
        bool lost = g.is_lost() || clock_type::now() >= g.valid_until();
        auto [released] = co_await g.release(asio::as_tuple(asio::use_awaitable));
        if (lost || released == dlock::error::lock_lost) {
            say("lost", o, token);  // the job was cancelled or stopped itself: expected
            continue;
        }
        if (failure)
            std::rethrow_exception(failure);
        if (released)  // the store could not be reached; the lease ends by itself
            std::cerr << "leader_election: release: " << released.message() << '\n';
        say("resigned", o, token);
    }
    co_return rounds;
}

bool parse(int argc, char** argv, options& o)
{
    const char* env = std::getenv("DLOCK_URL");
    o.url = env ? env : "redis://127.0.0.1:6379";
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string_view flag = argv[i];
        std::string_view value = argv[i + 1];
        bool ok = true;
        if (flag == "--url") {
            o.url = value;
        } else if (flag == "--id") {
            o.id = value;
        } else if (flag == "--file") {
            o.file = value;
        } else if (flag == "--lease") {
            ok = dlock::redis::parse_duration(value, o.lease) && o.lease.count() > 0;
        } else if (flag == "--period") {
            ok = dlock::redis::parse_duration(value, o.period) && o.period.count() > 0;
        } else if (flag == "--duration") {
            ok = dlock::redis::parse_duration(value, o.duration);
        } else if (flag == "--rounds") {
            auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), o.rounds);
            ok = ec == std::errc() && end == value.data() + value.size() && o.rounds >= 0;
        } else {
            ok = false;
        }
        if (!ok) {
            std::cerr << "leader_election: bad flag " << flag << ' ' << value << '\n';
            return false;
        }
    }
    if (argc % 2 == 0 || o.file.empty()) {
        std::cerr << "usage: leader_election --file PATH [--url URL] [--id ID] [--lease 10s] [--period 1s]"
                     " [--rounds N] [--duration 60s]\n";
        return false;
    }
    return true;
}

}  // namespace

int main(int argc, char** argv)
{
    options o;
    if (!parse(argc, argv, o))
        return 2;
    dlock::redis::config cfg;
    dlock::redis::config_error err;
    if (!dlock::redis::parse_url(o.url, cfg, err)) {
        std::cerr << "leader_election: " << err.message << '\n';
        return 2;
    }
    int fd = ::open(o.file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        std::cerr << "leader_election: cannot open " << o.file << ": " << std::strerror(errno) << '\n';
        return 1;
    }

    asio::io_context io;
    dlock::redis_store store(io.get_executor(), cfg);
    dlock::registry locks(store, {.lease = o.lease});
    stop_request stop;
    asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](boost::system::error_code ec, int) {
        if (!ec)
            stop.request();
    });
    asio::steady_timer deadline(io, o.duration);
    if (o.duration.count() > 0)
        deadline.async_wait([&](boost::system::error_code ec) {
            if (!ec)
                stop.request();
        });

    int status = -1;  // -1: still running
    asio::co_spawn(io, campaign(store, locks, o, fd, stop), [&](std::exception_ptr e, long rounds) {
        status = 0;
        if (e)
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& x) {
                std::cerr << "leader_election: " << x.what() << '\n';
                status = 1;
            }
        if (status == 0)
            say("done", o, static_cast<std::uint64_t>(rounds));
        signals.cancel();
        deadline.cancel();
        store.close();
    });
    // Normally io.run() returns once the campaign is over; the cap is for a Redis that stops
    // answering while we release (requests time out after 5 s each).
    if (o.duration.count() > 0)
        io.run_for(o.duration + 30s);
    else
        io.run();
    ::close(fd);
    if (status < 0)
        std::cerr << "leader_election: did not stop in time\n";
    return status < 0 ? 1 : status;
}
