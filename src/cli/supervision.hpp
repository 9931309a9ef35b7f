// SPDX-License-Identifier: BSL-1.0
// What `dlock run` and `dlock elect` share: signals and the command's exit read from a
// signalfd, the command run while a lease (or a leadership) holds and stopped when it is
// lost, and the end of the hold once the command exits.
#pragma once

#include <dlock/registry.hpp>

#include "cli/options.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <signal.h>
#include <sys/signalfd.h>

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dlock::cli {

// Signals and the child's exit, read from a signalfd. Shared with every callback, so a
// callback that runs after the command's coroutine has finished touches live state only.
struct supervisor : std::enable_shared_from_this<supervisor> {
    supervisor(boost::asio::any_io_executor ex, int fd, std::string name, std::chrono::milliseconds grace_period)
        : sfd(ex, fd), grace(ex), exited(ex, boost::asio::steady_timer::time_point::max()), name(std::move(name)),
          grace_period(grace_period)
    {
    }

    boost::asio::posix::stream_descriptor sfd;
    boost::asio::steady_timer grace;   // SIGTERM → SIGKILL after a lost lease
    boost::asio::steady_timer exited;  // cancelled when the command has exited
    std::string name;
    std::chrono::milliseconds grace_period;
    std::array<signalfd_siginfo, 8> buf{};
    boost::asio::cancellation_signal cancel_acquire;
    pid_t child = -1;
    bool child_exited = false;
    int wait_status = 0;
    int early_signal = 0;  // a signal that came before the command started
    int later_signal = 0;  // one that came once it had started (forwarded, or after its exit)
    bool lost = false;
    bool done = false;

    std::string what = "lease";  // what the command runs under, for messages ("leadership")

    void start_reading();
    void on_signal(const signalfd_siginfo& si);
    void reap();
    // A lost lease stops the command: SIGTERM now, SIGKILL after the grace period.
    void on_lost();
    // Ready for another command (elect --rejoin): no child, not lost, signals before it
    // starts cancel the next campaign again.
    void rearm();
    void finish();
};

/// Blocks the signals dlock handles (so only the signalfd sees them) except those the
/// caller ignored (nohup, `cmd &`): those stay ignored, for dlock and for the command.
struct signal_setup {
    sigset_t handled{}, previous_mask{};
    std::vector<int> ignored;
    int fd = -1;

    signal_setup()
    {
        ::sigemptyset(&handled);
        for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
            struct sigaction current {};
            ::sigaction(sig, nullptr, &current);
            if (current.sa_handler == SIG_IGN)
                ignored.push_back(sig);
            else
                ::sigaddset(&handled, sig);
        }
        ::sigaddset(&handled, SIGCHLD);
        ::pthread_sigmask(SIG_BLOCK, &handled, &previous_mask);
        fd = ::signalfd(-1, &handled, SFD_NONBLOCK | SFD_CLOEXEC);
    }
};

/// One command's run: the signals caught from the start (before the command runs they
/// cancel the wait, afterwards they are forwarded to it; SIGCHLD is blocked before fork, so
/// none is missed) and the supervisor reading them, finished when this goes.
struct supervised_run {
    signal_setup sigs;
    std::shared_ptr<supervisor> s;  ///< null if signals cannot be watched (ok() said why)

    supervised_run(boost::asio::any_io_executor ex, const options& o);
    ~supervised_run();
    supervised_run(const supervised_run&) = delete;
    supervised_run& operator=(const supervised_run&) = delete;
    /// False, with the reason on stderr, if signals cannot be watched.
    bool ok() const;
};

/// " within --wait 500ms" or " (one try: --wait 0)": how long a refused wait waited.
std::string describe_wait(const options& o);

/// Waits (at most 2 s) until the store has answered everything the registry sent (the
/// release of a cancelled attempt's lease), so that closing the store cannot leave it behind.
boost::asio::awaitable<void> drain(registry& reg);

/// What the command runs under: a lock's guard or an election's leadership.
struct hold_face {
    std::vector<std::string> env;  ///< the command's extra environment (DLOCK_NAME=..., ...)
    std::function<void(std::function<void(boost::system::error_code)>)> wait_lost;
    std::function<boost::asio::awaitable<boost::system::error_code>()> end;  ///< release or resign
};

/// Runs o.argv while `h` holds, stops it (SIGTERM, then SIGKILL after --grace) if `h` is
/// lost, ends `h` once it exits; returns the command's exit status, or lease_lost,
/// not_found, cannot_execute.
boost::asio::awaitable<int> run_while_held(const options& o, registry& reg, const std::shared_ptr<supervisor>& s,
                                           const signal_setup& sigs, hold_face h);

}  // namespace dlock::cli
