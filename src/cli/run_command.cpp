// SPDX-License-Identifier: BSL-1.0
// `dlock run NAME -- COMMAND`: acquire, run the command under the lease, release.
#include <dlock/error.hpp>
#include <dlock/registry.hpp>

#include "cli/child_process.hpp"
#include "cli/commands.hpp"
#include "cli/exit_status.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <memory>

namespace dlock::cli {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// Signals and the child's exit, read from a signalfd. Shared with every callback, so a
// callback that runs after the command's coroutine has finished touches live state only.
struct supervisor : std::enable_shared_from_this<supervisor> {
    supervisor(asio::any_io_executor ex, int fd, std::string name, std::chrono::milliseconds grace_period)
        : sfd(ex, fd), grace(ex), exited(ex, asio::steady_timer::time_point::max()), name(std::move(name)),
          grace_period(grace_period)
    {
    }

    asio::posix::stream_descriptor sfd;
    asio::steady_timer grace;   // SIGTERM → SIGKILL after a lost lease
    asio::steady_timer exited;  // cancelled when the command has exited
    std::string name;
    std::chrono::milliseconds grace_period;
    std::array<signalfd_siginfo, 8> buf{};
    asio::cancellation_signal cancel_acquire;
    pid_t child = -1;
    bool child_exited = false;
    int wait_status = 0;
    int early_signal = 0;  // a signal that came before the command started
    bool lost = false;
    bool done = false;

    void start_reading()
    {
        sfd.async_read_some(asio::buffer(buf), [self = shared_from_this()](error_code ec, std::size_t n) {
            if (ec || self->done)
                return;
            for (std::size_t i = 0; i < n / sizeof(signalfd_siginfo); ++i)
                self->on_signal(self->buf[i]);
            self->start_reading();
        });
    }

    void on_signal(const signalfd_siginfo& si)
    {
        int sig = static_cast<int>(si.ssi_signo);
        if (sig == SIGCHLD)
            return reap();
        if (child > 0 && !child_exited) {
            // Sent to dlock alone (kill, systemd, a supervisor): pass it on. From the
            // terminal (SI_KERNEL) the whole foreground group, the command too, has it already.
            if (si.ssi_code != SI_KERNEL)
                ::kill(child, sig);
        } else if (child < 0 && early_signal == 0) {
            early_signal = sig;
            cancel_acquire.emit(asio::cancellation_type::terminal);
        }
    }

    void reap()
    {
        if (child <= 0 || child_exited)
            return;
        int status = 0;
        if (::waitpid(child, &status, WNOHANG) != child)
            return;
        child_exited = true;
        wait_status = status;
        grace.cancel();
        exited.cancel();
    }

    // A lost lease stops the command: SIGTERM now, SIGKILL after the grace period.
    void on_lost()
    {
        lost = true;
        if (child <= 0 || child_exited)
            return;
        std::cerr << "dlock: the lease on '" << name << "' was lost; stopping the command (SIGTERM)\n";
        ::kill(child, SIGTERM);
        grace.expires_after(grace_period);
        grace.async_wait([self = shared_from_this()](error_code ec) {
            if (!ec && !self->child_exited) {
                std::cerr << "dlock: the command outlived --grace; SIGKILL\n";
                ::kill(self->child, SIGKILL);
            }
        });
    }

    void finish()
    {
        done = true;
        error_code ignored;
        sfd.close(ignored);
        grace.cancel();
        exited.cancel();
    }
};

std::string describe_wait(const options& o)
{
    if (!o.wait)
        return "";
    if (o.wait->count() == 0)
        return " (one try: --wait 0)";
    return " within --wait " + std::to_string(o.wait->count()) + "ms";
}

template <class Primitive>
asio::awaitable<std::tuple<error_code, guard>> acquire(Primitive& lk, const options& o, supervisor& s)
{
    auto tok = asio::bind_cancellation_slot(s.cancel_acquire.slot(), use_tuple);
    if (!o.wait)
        co_return co_await lk.acquire(tok);
    if (o.wait->count() == 0)
        co_return co_await lk.try_acquire(tok);
    co_return co_await lk.acquire_for(*o.wait, tok);
}

// Waits (at most 2 s) until the store has answered everything the registry sent, e.g. the
// release that gives back what a cancelled acquire's attempt took, so that closing the
// store right after cannot leave that lease behind.
asio::awaitable<void> drain(registry& reg)
{
    using namespace asio::experimental::awaitable_operators;
    asio::steady_timer bound(co_await asio::this_coro::executor, std::chrono::seconds(2));
    co_await (reg.async_drain(use_tuple) || bound.async_wait(use_tuple));
}

// What NAME is at the store, and the flags that ask for that, after a kind_mismatch:
// "'x' is held as a read-write lock: use --shared or --exclusive". Without a clear answer
// (the holder left meanwhile, a store that cannot tell), the store's own text.
asio::awaitable<std::string> kind_advice(const options& o, store& st)
{
    auto [ec, s] = co_await st.async_status(store_name(o), use_tuple);
    bool in_use = !ec && (s.held || s.queued > 0);
    std::string what = "'" + o.name + "' is " + (s.held ? "held" : "in use") + " as ";
    if (in_use && s.kind == lease_kind::permit && s.capacity > 0 && s.capacity != o.permits)
        co_return what + "a semaphore of " + std::to_string(s.capacity) + " permits: use --permits " +
            std::to_string(s.capacity);
    if (in_use && s.kind == lease_kind::read && (o.permits > 0 || !(o.shared || o.exclusive)))
        co_return what + "a read-write lock: use --shared or --exclusive";
    if (in_use && s.kind == lease_kind::mutex && (o.permits > 0 || o.shared || o.exclusive))
        co_return what + "a mutex: use neither --shared, --exclusive nor --permits";
    if (in_use && s.kind == lease_kind::leader)
        co_return what + "an election: its candidates hold it, not a lock";
    std::string text = st.last_error_text();
    if (text.rfind("dlock: ", 0) == 0)
        text.erase(0, 7);
    co_return "cannot acquire '" + o.name +
        "': " + (text.empty() ? make_error_code(error::kind_mismatch).message() : text);
}

// Blocks the signals dlock handles (so only the signalfd sees them) except those the
// caller ignored (nohup, `cmd &`): those stay ignored, for dlock and for the command.
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

}  // namespace

asio::awaitable<int> run_command(const options& o, store& st)
{
    auto ex = co_await asio::this_coro::executor;
    // Signals are caught from the start: before the command runs they cancel the wait,
    // afterwards they are forwarded to it. SIGCHLD is blocked before fork, so none is missed.
    signal_setup sigs;
    if (sigs.fd < 0) {
        std::cerr << "dlock: cannot watch signals: " << std::strerror(errno) << "\n";
        co_return exit_status::internal;
    }
    auto s = std::make_shared<supervisor>(ex, sigs.fd, o.name, o.grace);
    s->start_reading();
    struct finish_on_exit {
        std::shared_ptr<supervisor> s;
        ~finish_on_exit() { s->finish(); }
    } finally{s};

    if (int rc = co_await connect_or_explain(o, st))
        co_return rc;
    if (s->early_signal) {
        std::cerr << "dlock: interrupted by signal " << s->early_signal << " before running the command\n";
        co_return 128 + s->early_signal;
    }
    registry reg(st, lock_config{.prefix = o.prefix, .lease = o.lease, .watchdog = o.watchdog});
    // A mutex, a side of a read-write lock, or one of a semaphore's permits.
    lock lk;
    semaphore sem;
    if (o.permits > 0)
        sem = reg.obtain_semaphore(o.name, o.permits);
    else if (o.shared || o.exclusive)
        lk = o.shared ? reg.obtain_rw(o.name).read() : reg.obtain_rw(o.name).write();
    else
        lk = reg.obtain(o.name);
    std::tuple<error_code, guard> got;
    if (o.permits > 0)
        got = co_await acquire(sem, o, *s);
    else
        got = co_await acquire(lk, o, *s);
    auto& [ec, g] = got;
    if (s->early_signal) {
        if (g)
            co_await g.release(use_tuple);
        co_await drain(reg);
        std::cerr << "dlock: interrupted by signal " << s->early_signal << " before running the command\n";
        co_return 128 + s->early_signal;
    }
    if (ec == error::timeout && std::get<0>(co_await st.async_connect(use_tuple))) {
        // The wait ran out because the server went away, not because of a holder.
        std::cerr << "dlock: lost the server at " << st.describe() << " while waiting for '" << o.name << "'\n";
        co_return exit_status::unavailable;
    }
    if (ec == error::timeout || (!ec && !g)) {
        co_await drain(reg);
        std::cerr << "dlock: '" << o.name << "' is held elsewhere; not acquired" << describe_wait(o) << "\n";
        co_return o.conflict_exit_code;
    }
    if (ec == error::kind_mismatch) {
        co_await drain(reg);
        std::cerr << "dlock: " << co_await kind_advice(o, st) << "\n";
        co_return exit_status::kind_mismatch;
    }
    if (ec) {
        bool usage = ec == error::invalid_name || ec == error::invalid_lease;
        std::cerr << "dlock: cannot acquire '" << o.name << "': " << ec.message() << "\n";
        if (!lk.diagnostics().empty())
            std::cerr << "dlock: the server said: " << lk.diagnostics() << "\n";
        co_return usage ? exit_status::usage : exit_status::unavailable;
    }
    if (o.verbose)
        std::cerr << "dlock: acquired '" << o.name << "', fencing token " << g.fencing_token() << "\n";

    auto sp =
        spawn(o.argv,
              environment_with({"DLOCK_NAME=" + o.name, "DLOCK_FENCING_TOKEN=" + std::to_string(g.fencing_token()),
                                "DLOCK_LEASE_MS=" + std::to_string(o.lease.count())}),
              sigs.previous_mask, sigs.ignored);
    if (sp.pid < 0) {
        co_await g.release(use_tuple);
        std::cerr << "dlock: cannot run '" << o.argv[0] << "': " << std::strerror(sp.error) << "\n";
        co_return sp.error == ENOENT ? exit_status::not_found : exit_status::cannot_execute;
    }
    s->child = sp.pid;
    s->reap();  // it may already have exited (its SIGCHLD is then queued too: harmless)
    g.wait_lost([s](error_code ec) {
        if (ec == error::lock_lost)
            s->on_lost();
    });
    while (!s->child_exited)
        co_await s->exited.async_wait(use_tuple);

    auto [rec] = co_await g.release(use_tuple);
    co_await drain(reg);  // a reader's release may still be on its way (a read lease lingers a turn)
    if (s->lost || rec == error::lock_lost) {
        if (!s->lost)
            std::cerr << "dlock: the lease on '" << o.name << "' had been lost before the command finished\n";
        co_return exit_status::lease_lost;
    }
    if (rec)
        std::cerr << "dlock: warning: could not release '" << o.name << "' (" << rec.message()
                  << "); it frees itself when its lease ends\n";
    if (o.verbose)
        std::cerr << "dlock: released '" << o.name << "'\n";
    co_return exit_status_of(s->wait_status);
}

}  // namespace dlock::cli
