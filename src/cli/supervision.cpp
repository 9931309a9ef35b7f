// SPDX-License-Identifier: BSL-1.0
#include "cli/supervision.hpp"

#include <dlock/error.hpp>

#include "cli/child_process.hpp"
#include "cli/exit_status.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

namespace dlock::cli {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

}  // namespace

void supervisor::start_reading()
{
    sfd.async_read_some(asio::buffer(buf), [self = shared_from_this()](error_code ec, std::size_t n) {
        if (ec || self->done)
            return;
        for (std::size_t i = 0; i < n / sizeof(signalfd_siginfo); ++i)
            self->on_signal(self->buf[i]);
        self->start_reading();
    });
}

void supervisor::on_signal(const signalfd_siginfo& si)
{
    int sig = static_cast<int>(si.ssi_signo);
    if (sig == SIGCHLD)
        return reap();
    if (child > 0 && later_signal == 0)
        later_signal = sig;
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

void supervisor::reap()
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
void supervisor::on_lost()
{
    lost = true;
    if (child <= 0 || child_exited)
        return;
    std::cerr << "dlock: the " << what << " on '" << name << "' was lost; stopping the command (SIGTERM)\n";
    ::kill(child, SIGTERM);
    grace.expires_after(grace_period);
    grace.async_wait([self = shared_from_this()](error_code ec) {
        if (!ec && !self->child_exited) {
            std::cerr << "dlock: the command outlived --grace; SIGKILL\n";
            ::kill(self->child, SIGKILL);
        }
    });
}

void supervisor::rearm()
{
    child = -1;
    child_exited = false;
    wait_status = 0;
    lost = false;
    grace.cancel();
}

void supervisor::finish()
{
    done = true;
    error_code ignored;
    sfd.close(ignored);
    grace.cancel();
    exited.cancel();
}

supervised_run::supervised_run(asio::any_io_executor ex, const options& o)
{
    if (sigs.fd < 0)
        return;
    s = std::make_shared<supervisor>(ex, sigs.fd, o.name, o.grace);
    s->start_reading();
}

supervised_run::~supervised_run()
{
    if (s)
        s->finish();
}

bool supervised_run::ok() const
{
    if (!s)
        std::cerr << "dlock: cannot watch signals: " << std::strerror(errno) << "\n";
    return s != nullptr;
}

std::string describe_wait(const options& o)
{
    if (!o.wait)
        return "";
    if (o.wait->count() == 0)
        return " (one try: --wait 0)";
    return " within --wait " + std::to_string(o.wait->count()) + "ms";
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


asio::awaitable<int> run_while_held(const options& o, registry& reg, const std::shared_ptr<supervisor>& s,
                                    const signal_setup& sigs, hold_face h)
{
    auto sp = spawn(o.argv, environment_with(h.env), sigs.previous_mask, sigs.ignored);
    if (sp.pid < 0) {
        co_await h.end();
        std::cerr << "dlock: cannot run '" << o.argv[0] << "': " << std::strerror(sp.error) << "\n";
        co_return sp.error == ENOENT ? exit_status::not_found : exit_status::cannot_execute;
    }
    s->child = sp.pid;
    s->reap();  // it may already have exited (its SIGCHLD is then queued too: harmless)
    h.wait_lost([s](error_code ec) {
        if (ec == error::lock_lost)
            s->on_lost();
    });
    while (!s->child_exited)
        co_await s->exited.async_wait(use_tuple);

    auto rec = co_await h.end();
    co_await drain(reg);  // a reader's release may still be on its way (a read lease lingers a turn)
    if (s->lost || rec == error::lock_lost) {
        if (!s->lost)
            std::cerr << "dlock: the " << s->what << " on '" << o.name
                      << "' had been lost before the command finished\n";
        co_return exit_status::lease_lost;
    }
    if (rec)
        std::cerr << "dlock: warning: could not " << (s->what == "lease" ? "release" : "resign") << " '" << o.name
                  << "' (" << rec.message() << "); it frees itself when its lease ends\n";
    if (o.verbose)
        std::cerr << "dlock: " << (s->what == "lease" ? "released" : "resigned") << " '" << o.name << "'\n";
    co_return exit_status_of(s->wait_status);
}

}  // namespace dlock::cli
