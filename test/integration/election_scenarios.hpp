// SPDX-License-Identifier: BSL-1.0
// Leader election with campaigning worker processes (integration/latch_worker.cpp
// "campaign", on a Redis port or a store URL), written once for every store with elections:
// one leader at a time by the leaders' own account (a shared log of terms), failover after
// SIGKILL and SIGSTOP, observers; two stores' candidates taking turns in one process; and
// election::run re-joining after its term is taken.
// election_test.cpp runs them on Redis, zookeeper_election_test.cpp on ZooKeeper,
// etcd_election_test.cpp on etcd.
#pragma once

#include <dlock/dlock.hpp>

#include "common/child.hpp"
#include "common/scratch_dir.hpp"
#include "integration/consensus/support.hpp"  // status_until
#include "integration/lock_test_util.hpp"
#include "integration/support.hpp"  // task_group

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <stdlib.h>

#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <sstream>

namespace dlock::test::election_scenarios {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

/// A store of the kind under test, on `io`, for the observer in the test's own process.
using store_factory = std::function<std::unique_ptr<dlock::store>(asio::io_context&)>;

inline std::string worker()
{
    return DLOCK_LATCH_WORKER_PATH;
}

inline std::string temp_log()
{
    return dlock::test::scratch_dir("dlock-election") + "/log";
}

// The log in file order: terms never go down, and each term is one leader's. Returns the
// terms seen, in order.
inline std::vector<std::uint64_t> check_log(const std::string& path)
{
    std::ifstream in(path);
    std::vector<std::uint64_t> terms;
    std::map<std::uint64_t, std::string> owner;
    std::uint64_t term = 0;
    std::string id;
    while (in >> term >> id) {
        if (!terms.empty())
            BOOST_TEST(term >= terms.back(), "term " << term << " after " << terms.back());
        auto [it, fresh] = owner.emplace(term, id);
        BOOST_TEST(it->second == id, "term " << term << " written by " << it->second << " and " << id);
        if (terms.empty() || terms.back() != term)
            terms.push_back(term);
    }
    return terms;
}

// Watches the election from the test's own process on a thread-free io_context: next()
// runs it until the observer reports a change matching `pred` (bounded).
struct observer_harness {
    asio::io_context io;
    std::unique_ptr<dlock::store> st;
    dlock::registry reg;
    dlock::election e;
    dlock::leader_observer obs;
    std::vector<dlock::leader_info> seen;

    explicit observer_harness(const store_factory& make) : st(make(io)), reg(*st), e(reg, "lead"), obs(e.observe()) {}
    ~observer_harness()
    {
        obs = {};
        st->close();
        io.run_for(1s);
    }
    // Runs until a change satisfying `pred` arrives; every change on the way is kept.
    std::optional<dlock::leader_info> next(std::function<bool(const dlock::leader_info&)> pred,
                                           std::chrono::milliseconds limit = 20s)
    {
        std::optional<dlock::leader_info> found;
        spawn(io, [&]() -> asio::awaitable<void> {
            for (;;) {
                auto info = co_await obs.async_next(asio::use_awaitable);
                seen.push_back(info);
                if (pred(info)) {
                    found = info;
                    co_return;
                }
            }
        });
        io.restart();
        auto deadline = clock_type::now() + limit;
        while (!found && clock_type::now() < deadline)
            io.run_one_for(100ms);
        return found;
    }
};

/// The lines `dlock elect --observe` prints, read until one ends with `tail` (at most 8
/// lines, each within 20 s): that line, or "<eof>" / "<not seen>".
inline std::string observed(child& o, const std::string& tail)
{
    for (int i = 0; i < 8; ++i) {
        auto line = o.read_line(std::chrono::seconds(20));
        if (!line)
            return "<eof>";
        if (line->size() >= tail.size() && line->compare(line->size() - tail.size(), tail.size(), tail) == 0)
            return *line;
    }
    return "<not seen>";
}

/// Three processes campaign four rounds each, writing their term to a shared log while they
/// lead by their own account: terms never go down, each is one leader's, every round led.
inline void one_leader_at_a_time_by_the_leaders_own_account(const std::string& where)
{
    auto log = temp_log();
    constexpr int processes = 3, rounds = 4;
    std::vector<std::unique_ptr<child>> workers;
    for (int p = 0; p < processes; ++p)
        workers.push_back(std::make_unique<child>(std::vector<std::string>{
            worker(), "campaign", where, "lead", "2000", log, "p" + std::to_string(p), "5", std::to_string(rounds)}));
    for (auto& w : workers)
        BOOST_TEST(w->wait(60s) == 0);
    auto terms = check_log(log);
    BOOST_TEST(terms.size() == std::size_t(processes * rounds));  // every term led, each once
    BOOST_TEST(std::set<std::uint64_t>(terms.begin(), terms.end()).size() == terms.size());
}

/// The leader process is SIGKILLed: nobody announces it; the store lets its lease (its
/// session) end, the observer reads "no leader", and a waiting campaigner takes over.
/// `gap_known` is false where an observer cannot learn another holder's lease end
/// (ZooKeeper tells no client another session's timeout): the gap is then seen only when
/// the observer reads before the next candidate proclaims, a race the test must not assert.
inline void failover_after_the_leader_is_killed_and_observers_see_no_leader(const std::string& where,
                                                                            const store_factory& make,
                                                                            bool gap_known = true)
{
    auto log = temp_log();
    observer_harness h(make);
    BOOST_REQUIRE(h.next([](auto& i) { return !i.present; }));  // nobody yet
    std::map<std::string, std::unique_ptr<child>> workers;
    for (const char* id : {"a", "b", "c"})
        workers[id] = std::make_unique<child>(
            std::vector<std::string>{worker(), "campaign", where, "lead", "1000", log, id, "0", "1"});
    auto first = h.next([](auto& i) { return i.present; });
    BOOST_REQUIRE(first);
    workers[first->value]->signal(SIGKILL);
    workers[first->value]->wait();
    // Nobody announces a crash: the lease runs out, the observer reads "no leader" then,
    // and a waiting campaigner takes over with a higher term.
    auto next = h.next([&](auto& i) { return i.present && i.value != first->value; });
    BOOST_REQUIRE(next);
    BOOST_TEST(next->term > first->term);
    bool gap = false;
    for (auto& i : h.seen)
        gap = gap || (!i.present && &i != &h.seen.front());
    if (gap_known)
        BOOST_TEST(gap, "no 'no leader' report between the killed leader and the next");
    // Whatever was seen in between, the terms never go back.
    std::uint64_t last_term = 0;
    for (auto& i : h.seen)
        if (i.present) {
            BOOST_TEST(i.term >= last_term);
            last_term = i.term;
        }
    check_log(log);
}

/// The leader is SIGSTOPped past its lease: another takes over with a higher term, and the
/// paused one, resumed, reports the loss and writes nothing more.
inline void a_paused_leader_learns_on_resume_that_it_lost_with_a_lower_term(const std::string& where,
                                                                            const store_factory& make)
{
    auto log = temp_log();
    observer_harness h(make);
    child a({worker(), "campaign", where, "lead", "1000", log, "a", "0", "1"});
    auto line = a.read_line(20s).value_or("");
    BOOST_REQUIRE(line.rfind("leader a ", 0) == 0);
    auto term_a = std::stoull(line.substr(9));
    // Paused only once it has written (bounded wait on the file).
    auto log_has = [&](std::size_t n) {
        auto deadline = clock_type::now() + 20s;
        while (clock_type::now() < deadline) {
            std::ifstream in(log);
            std::set<std::string> t;
            for (std::string term, id; in >> term >> id;)
                t.insert(term);
            if (t.size() >= n)
                return true;
        }
        return false;
    };
    BOOST_REQUIRE(log_has(1));
    child b({worker(), "campaign", where, "lead", "1000", log, "b", "0", "1"});
    a.signal(SIGSTOP);
    auto taken = h.next([](auto& i) { return i.present && i.value == "b"; });
    BOOST_REQUIRE(taken);
    BOOST_TEST(taken->term > term_a);
    a.signal(SIGCONT);
    BOOST_TEST(a.read_line(20s).value_or("") == "lost " + std::to_string(term_a));
    BOOST_TEST(a.wait() == 0);
    // b's first line reaches the log (bounded wait on the file), then b stops.
    BOOST_TEST_MESSAGE("b: " << b.read_line(20s).value_or("<none>"));
    BOOST_TEST(log_has(2));
    b.signal(SIGKILL);
    b.wait();
    // The paused one wrote nothing once it resumed: terms in the log never go down.
    auto terms = check_log(log);
    BOOST_TEST_REQUIRE(terms.size() == 2u, "log:\n" << std::ifstream(log).rdbuf());
    BOOST_TEST(terms[0] == term_a);
    BOOST_TEST(terms[1] == taken->term);
}

/// A (store `a_store`, registry `a`) leads "lead" with "alpha" while B observes and sees it
/// with its term; `while_a_leads` checks the store's own layout then; A proclaims
/// "alpha-2", which B sees; B campaigns, queues behind A (as `a_store` shows) and does not
/// lead until A resigns; the observer sees "beta" with a higher term, and no other leader
/// in between; once B resigns the name is free.
inline asio::awaitable<void>
candidates_take_turns_while_one_observes(dlock::store& a_store, dlock::registry& a, dlock::registry& b,
                                         std::function<asio::awaitable<void>(const dlock::leadership&)> while_a_leads)
{
    dlock::election ea(a, "lead"), eb(b, "lead");
    auto la = co_await ea.campaign("alpha");
    BOOST_TEST(la.is_leader());
    auto obs = eb.observe();
    auto first = co_await obs.async_next();
    BOOST_TEST(first.present);
    BOOST_TEST(first.value == "alpha");
    BOOST_TEST(first.term == la.term());
    co_await while_a_leads(la);
    co_await la.proclaim("alpha-2");
    auto second = co_await obs.async_next();
    BOOST_TEST(second.value == "alpha-2");
    BOOST_TEST(second.term == la.term());
    BOOST_TEST(la.is_leader());  // the watchdog still knows the lease after its value changed
    std::optional<dlock::leadership> lb;
    task_group tasks(co_await asio::this_coro::executor);
    auto campaign_b = [&]() -> asio::awaitable<void> { lb = co_await eb.campaign("beta"); };
    tasks.spawn(campaign_b());  // the closure lives in this frame, as the coroutine needs
    auto queued = co_await status_until(a_store, "dlock:lead", [](auto& s) { return s.queued == 1; });
    BOOST_TEST(queued.queued == 1u);
    BOOST_TEST(!lb.has_value(), "B led while A did");
    auto a_term = la.term();
    co_await la.resign();
    // No other leader may come in between (B's key or node leads before its value is written).
    dlock::leader_info next;
    for (int i = 0; i < 4 && next.value != "beta"; ++i) {
        next = co_await obs.async_next();
        BOOST_TEST((next.value == "beta" || !next.present), "value " << next.value);
    }
    BOOST_TEST(next.value == "beta");
    BOOST_TEST(next.term > a_term);
    co_await tasks.join();
    BOOST_REQUIRE(lb.has_value());
    BOOST_TEST(lb->is_leader());
    // A leadership that resigned proclaims nothing.
    auto [pec] = co_await la.proclaim("late", asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(pec, "a resigned leader's proclaim succeeded");
    co_await lb->resign();
    auto none = co_await status_until(a_store, "dlock:lead", [](auto& s) { return !s.held; });
    BOOST_TEST(!none.held);
}

/// election::run with rejoin on a real store: an operator force-releases the first term's
/// name; the watchdog's next renewal finds it gone, the body stops, the candidate campaigns
/// again and the body runs a second term with a higher term, then returns and resigns.
inline asio::awaitable<void> a_rejoining_candidate_leads_again_after_its_term_is_taken(dlock::store& st,
                                                                                       dlock::registry& reg)
{
    dlock::election e(reg, "rejoin");
    std::vector<std::uint64_t> terms;
    auto ex = co_await asio::this_coro::executor;
    auto body = [&](dlock::leadership& l) -> asio::awaitable<void> {
        terms.push_back(l.term());
        if (terms.size() > 1)
            co_return;
        BOOST_TEST((co_await st.async_force_release("dlock:rejoin", asio::use_awaitable)));
        asio::steady_timer far(ex, 120s);  // only the loss ends the first term
        co_await far.async_wait(asio::use_awaitable);
    };
    co_await e.run("r", body, {.rejoin = true});
    BOOST_REQUIRE(terms.size() == 2u);
    BOOST_TEST(terms[1] > terms[0]);
    auto none = co_await status_until(st, "dlock:rejoin", [](auto& s) { return !s.held; });
    BOOST_TEST(!none.held);
}

}  // namespace dlock::test::election_scenarios
