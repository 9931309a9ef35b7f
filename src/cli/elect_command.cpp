// SPDX-License-Identifier: BSL-1.0
// `dlock elect NAME [--value V] -- COMMAND`: campaign, run the command while leading (as
// `etcdctl elect` runs nothing, this stops the command when leadership is lost), resign.
// `dlock elect --observe NAME`: print each change of leader, term and value until a signal.
// With --rejoin, a lost leadership campaigns again and runs the command again.
#include <dlock/election.hpp>
#include <dlock/error.hpp>
#include <dlock/registry.hpp>

#include "cli/commands.hpp"
#include "cli/exit_status.hpp"
#include "cli/supervision.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <unistd.h>

#include <cstring>
#include <iostream>
#include <memory>

namespace dlock::cli {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// Without --value: "host:pid", so observers can tell candidates apart.
std::string default_value()
{
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0)
        std::strcpy(host, "localhost");
    return std::string(host) + ":" + std::to_string(::getpid());
}

// One change as a line: "leader TERM VALUE" or "no leader"; with --json, one object.
std::string describe(const leader_info& i, bool json)
{
    if (json) {
        boost::json::object o{{"leader", i.present}};
        if (i.present) {
            o["term"] = i.term;
            o["value"] = i.value;
        }
        return boost::json::serialize(o);
    }
    return i.present ? "leader " + std::to_string(i.term) + " " + i.value : "no leader";
}

// The store's refusal, said for an election.
int explain(const options& o, store& st, error_code ec, const std::string& what)
{
    if (ec == error::not_supported) {
        std::cerr << "dlock: " << st.describe() << " keeps no elections (Redis, ZooKeeper and etcd do)\n";
        return exit_status::unavailable;
    }
    if (ec == error::kind_mismatch) {
        std::cerr << "dlock: '" << o.name << "' is in use as another primitive, not an election";
        if (auto text = st.last_error_text(); !text.empty())
            std::cerr << " (" << text << ")";
        std::cerr << "\n";
        return exit_status::kind_mismatch;
    }
    std::cerr << "dlock: cannot " << what << " '" << o.name << "': " << ec.message() << "\n";
    if (auto text = st.last_error_text(); !text.empty())
        std::cerr << "dlock: the server said: " << text << "\n";
    bool usage = ec == error::invalid_name || ec == error::invalid_lease;
    return usage ? exit_status::usage : exit_status::unavailable;
}

asio::awaitable<int> observe(const options& o, store& st, election& e, supervisor& s)
{
    auto obs = e.observe();
    for (;;) {
        if (s.early_signal)  // it came before this wait was bound to the signal's cancellation
            co_return exit_status::ok;
        auto [ec, info] = co_await obs.async_next(asio::bind_cancellation_slot(s.cancel_acquire.slot(), use_tuple));
        if (s.early_signal)
            co_return exit_status::ok;  // the way an observer is stopped
        if (ec)
            co_return explain(o, st, ec, "observe");
        std::cout << describe(info, o.json) << std::endl;  // flushed: a pipe's reader sees each change
    }
}

// One term: campaign, run the command while leading, resign when it exits.
asio::awaitable<int> lead_once(const options& o, store& st, registry& reg, election& e, supervised_run& run,
                               const std::string& value)
{
    auto& s = run.s;
    auto got = co_await e.campaign(value, asio::bind_cancellation_slot(s->cancel_acquire.slot(), use_tuple));
    auto ec = std::get<0>(got);
    auto& l = std::get<1>(got);
    if (s->early_signal) {
        if (l.is_leader())
            co_await l.resign(use_tuple);
        co_await drain(reg);
        std::cerr << "dlock: interrupted by signal " << s->early_signal << " before running the command\n";
        co_return 128 + s->early_signal;
    }
    if (ec) {
        co_await drain(reg);
        co_return explain(o, st, ec, "campaign for");
    }
    if (o.verbose)
        std::cerr << "dlock: leading '" << o.name << "', term " << l.term() << ", value '" << value << "'\n";
    hold_face h;
    h.env = {"DLOCK_NAME=" + o.name, "DLOCK_FENCING_TOKEN=" + std::to_string(l.term()), "DLOCK_LEADER_VALUE=" + value,
             "DLOCK_LEASE_MS=" + std::to_string(o.lease.count())};
    h.wait_lost = [&l](std::function<void(error_code)> f) { l.wait_lost(std::move(f)); };
    h.end = [&l]() -> asio::awaitable<error_code> { co_return std::get<0>(co_await l.resign(use_tuple)); };
    co_return co_await run_while_held(o, reg, s, run.sigs, std::move(h));
}

}  // namespace

asio::awaitable<int> elect_command(const options& o, store& st)
{
    supervised_run run(co_await asio::this_coro::executor, o);
    if (!run.ok())
        co_return exit_status::internal;
    auto& s = run.s;
    s->what = "leadership";

    if (int rc = co_await connect_or_explain(o, st))
        co_return rc;
    registry reg(st, lock_config{.prefix = o.prefix, .lease = o.lease, .watchdog = o.watchdog});
    election e(reg, o.name);
    if (o.observe) {
        int rc = co_await observe(o, st, e, *s);
        co_await drain(reg);
        co_return rc;
    }
    if (s->early_signal) {
        std::cerr << "dlock: interrupted by signal " << s->early_signal << " before running the command\n";
        co_return 128 + s->early_signal;
    }
    auto value = o.value ? *o.value : default_value();
    for (;;) {
        int rc = co_await lead_once(o, st, reg, e, run, value);
        // --rejoin: a term ended by its loss alone (no signal asked dlock to stop) is run again.
        if (!o.rejoin || rc != exit_status::lease_lost || s->later_signal)
            co_return rc;
        std::cerr << "dlock: campaigning again for '" << o.name << "' (--rejoin)\n";
        s->rearm();
    }
}

}  // namespace dlock::cli
