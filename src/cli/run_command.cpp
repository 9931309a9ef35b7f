// SPDX-License-Identifier: BSL-1.0
// `dlock run NAME -- COMMAND`: acquire, run the command under the lease, release.
#include <dlock/error.hpp>
#include <dlock/registry.hpp>

#include "cli/commands.hpp"
#include "cli/exit_status.hpp"
#include "cli/supervision.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <iostream>
#include <memory>

namespace dlock::cli {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

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

}  // namespace

asio::awaitable<int> run_command(const options& o, store& st)
{
    supervised_run run(co_await asio::this_coro::executor, o);
    if (!run.ok())
        co_return exit_status::internal;
    auto& s = run.s;

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

    hold_face h;
    h.env = {"DLOCK_NAME=" + o.name, "DLOCK_FENCING_TOKEN=" + std::to_string(g.fencing_token()),
             "DLOCK_LEASE_MS=" + std::to_string(o.lease.count())};
    h.wait_lost = [&g](std::function<void(error_code)> f) { g.wait_lost(std::move(f)); };
    h.end = [&g]() -> asio::awaitable<error_code> { co_return std::get<0>(co_await g.release(use_tuple)); };
    co_return co_await run_while_held(o, reg, s, run.sigs, std::move(h));
}

}  // namespace dlock::cli
