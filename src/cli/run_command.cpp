// `dlock run NAME -- COMMAND`: acquire, run the command under the lease, release.
#include "cli/child_process.hpp"
#include "cli/commands.hpp"
#include "cli/exit_status.hpp"

#include <dlock/error.hpp>
#include <dlock/registry.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <sys/wait.h>
#include <signal.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <iostream>

namespace dlock::cli {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// What the signal and loss callbacks share with the main flow.
struct supervision {
    pid_t child = -1;
    bool child_exited = false;
    int early_signal = 0;  // a signal that came before the command started
    bool lost = false;
    asio::cancellation_signal cancel_acquire;
};

std::string describe_wait(const options& o)
{
    if (!o.wait)
        return "";
    if (o.wait->count() == 0)
        return " (one try: --wait 0)";
    return " within --wait " + std::to_string(o.wait->count()) + "ms";
}

asio::awaitable<std::tuple<error_code, guard>> acquire(lock& lk, const options& o, supervision& s)
{
    auto tok = asio::bind_cancellation_slot(s.cancel_acquire.slot(), use_tuple);
    if (!o.wait)
        co_return co_await lk.acquire(tok);
    if (o.wait->count() == 0)
        co_return co_await lk.try_acquire(tok);
    co_return co_await lk.acquire_for(*o.wait, tok);
}

}  // namespace

asio::awaitable<int> run_command(const options& o, backend& b)
{
    auto ex = co_await asio::this_coro::executor;
    // Signals are caught from the start: before the command runs they cancel the wait,
    // afterwards they are forwarded to it. SIGCHLD is caught before fork so none is missed.
    asio::signal_set signals(ex, SIGINT, SIGTERM, SIGHUP);
    signals.add(SIGQUIT);
    asio::signal_set sigchld(ex, SIGCHLD);
    supervision s;
    std::function<void()> arm_signals = [&] {
        signals.async_wait([&](error_code ec, int sig) {
            if (ec)
                return;  // cancelled: the frame may be gone, touch nothing
            if (s.child > 0 && !s.child_exited) {
                ::kill(s.child, sig);
            } else if (s.child < 0) {
                s.early_signal = sig;
                s.cancel_acquire.emit(asio::cancellation_type::terminal);
            }
            arm_signals();
        });
    };
    arm_signals();

    if (int rc = co_await connect_or_explain(o, b)) {
        signals.cancel();
        co_return rc;
    }
    registry reg(*b.st, lock_config{.prefix = o.prefix, .lease = o.lease, .watchdog = o.watchdog});
    lock lk = reg.obtain(o.name);
    auto [ec, g] = co_await acquire(lk, o, s);
    if (s.early_signal) {
        signals.cancel();
        if (g)
            co_await g.release(use_tuple);
        std::cerr << "dlock: interrupted by signal " << s.early_signal << " before running the command\n";
        co_return 128 + s.early_signal;
    }
    if (ec == error::timeout && !b.reachable()) {
        signals.cancel();  // the wait ran out because the server went away, not a holder
        std::cerr << "dlock: lost the server at " << b.where << " while waiting for '" << o.name
                  << "'\n";
        co_return exit_status::unavailable;
    }
    if (ec == error::timeout || (!ec && !g)) {
        signals.cancel();
        std::cerr << "dlock: '" << o.name << "' is held elsewhere; not acquired" << describe_wait(o) << "\n";
        co_return o.conflict_exit_code;
    }
    if (ec) {
        signals.cancel();
        bool usage = ec == error::invalid_name || ec == error::invalid_lease;
        std::cerr << "dlock: cannot acquire '" << o.name << "': " << ec.message() << "\n";
        co_return usage ? exit_status::usage : exit_status::unavailable;
    }
    if (o.verbose)
        std::cerr << "dlock: acquired '" << o.name << "', fencing token " << g.fencing_token() << "\n";

    auto sp = spawn(o.argv, environment_with({"DLOCK_NAME=" + o.name,
                                              "DLOCK_FENCING_TOKEN=" + std::to_string(g.fencing_token()),
                                              "DLOCK_LEASE_MS=" + std::to_string(o.lease.count())}));
    if (sp.pid < 0) {
        signals.cancel();
        co_await g.release(use_tuple);
        std::cerr << "dlock: cannot run '" << o.argv[0] << "': " << std::strerror(sp.error) << "\n";
        co_return sp.error == ENOENT ? exit_status::not_found : exit_status::cannot_execute;
    }
    s.child = sp.pid;

    // A lost lease stops the command: SIGTERM now, SIGKILL after the grace period.
    asio::steady_timer grace(ex);
    g.wait_lost([&](error_code ec) {
        if (ec != error::lock_lost)
            return;  // released or cancelled: the frame may be gone
        s.lost = true;
        if (s.child_exited)
            return;
        std::cerr << "dlock: the lease on '" << o.name << "' was lost; stopping the command (SIGTERM)\n";
        ::kill(s.child, SIGTERM);
        grace.expires_after(o.grace);
        grace.async_wait([&](error_code ec) {
            if (!ec && !s.child_exited) {
                std::cerr << "dlock: the command outlived --grace; SIGKILL\n";
                ::kill(s.child, SIGKILL);
            }
        });
    });

    int wait_status = 0;
    for (;;) {
        pid_t r = ::waitpid(s.child, &wait_status, WNOHANG);
        if (r == s.child)
            break;
        if (r < 0 && errno != EINTR) {  // cannot happen unless someone reaped our child
            std::cerr << "dlock: lost track of the command: " << std::strerror(errno) << "\n";
            wait_status = 0xff00;  // exit status 255
            break;
        }
        co_await sigchld.async_wait(use_tuple);
    }
    s.child_exited = true;
    grace.cancel();
    signals.cancel();

    auto [rec] = co_await g.release(use_tuple);
    if (s.lost || rec == error::lock_lost) {
        if (!s.lost)
            std::cerr << "dlock: the lease on '" << o.name << "' had been lost before the command finished\n";
        co_return exit_status::lease_lost;
    }
    if (rec)
        std::cerr << "dlock: warning: could not release '" << o.name << "' (" << rec.message()
                  << "); it frees itself when its lease ends\n";
    if (o.verbose)
        std::cerr << "dlock: released '" << o.name << "'\n";
    co_return exit_status_of(wait_status);
}

}  // namespace dlock::cli
