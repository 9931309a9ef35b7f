// SPDX-License-Identifier: BSL-1.0
// Elections on a throwaway MariaDB: the scenarios every store with elections runs
// (election_scenarios.hpp: worker processes campaigning, failover after SIGKILL and SIGSTOP,
// two stores' candidates taking turns under an observer, a re-joining candidate), and what
// the name's row keeps: the value is the lease's that wrote it, and goes with that lease.
#include "integration/election_scenarios.hpp"
#include "integration/sql/mariadb_family.hpp"

#include <signal.h>

using namespace dlock::test;  // its asio alias and chrono literals too

namespace {

mariadb_server& srv()
{
    return mariadb_family::server();
}

std::string value_of(const std::string& name)
{
    // The row's value counts while the lease that wrote it owns the row.
    auto v = srv().sql("SELECT COALESCE(IF(value_owner = owner, value, NULL), '<null>') FROM dlock.dlock_locks"
                       " WHERE name = " +
                       mariadb_family::literal(name));
    while (!v.empty() && (v.back() == '\n' || v.back() == ' '))
        v.pop_back();
    return v;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(mariadb_election)

// A leader's loss is its row's end on the server's clock, which observers read with its
// remaining time: they report "no leader" once it has passed.
BOOST_AUTO_TEST_CASE(one_leader_at_a_time_failover_after_kill_and_pause)
{
    auto url = srv().url();
    election_scenarios::store_factory make = [&](asio::io_context& io) {
        return std::make_unique<dlock::mariadb_store>(io.get_executor(), srv().config());
    };
    election_scenarios::one_leader_at_a_time_by_the_leaders_own_account(url);
    election_scenarios::failover_after_the_leader_is_killed_and_observers_see_no_leader(url, make);
    election_scenarios::a_paused_leader_learns_on_resume_that_it_lost_with_a_lower_term(url, make);
}

BOOST_AUTO_TEST_CASE(candidates_take_turns_and_the_observer_sees_each_leader)
{
    asio::io_context io;
    dlock::mariadb_store a_store(io.get_executor(), srv().config()), b_store(io.get_executor(), srv().config());
    dlock::registry a(a_store, {.lease = 3s}), b(b_store, {.lease = 3s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            // The leader is the row's owner, its value the row's.
            auto layout = [&](const dlock::leadership& la) -> asio::awaitable<void> {
                auto st = co_await a_store.async_status("dlock:lead", asio::use_awaitable);
                BOOST_TEST(st.fencing_token == la.term());
                BOOST_TEST(value_of("dlock:lead") == "alpha");
            };
            co_await election_scenarios::candidates_take_turns_while_one_observes(a_store, a, b, layout);
            co_await election_scenarios::a_rejoining_candidate_leads_again_after_its_term_is_taken(a_store, a);
            a_store.close();
            b_store.close();
        },
        60s);
}

// Fenced by the lease: a proclaim by a token that no longer holds is refused, and a value
// never outlives its lease (an expiry or a release leaves the next owner none). Values are
// bytes: a NUL comes back whole.
BOOST_AUTO_TEST_CASE(a_value_goes_with_its_lease)
{
    asio::io_context io;
    dlock::mariadb_store st(io.get_executor(), srv().config());
    auto& ops = *st.elections();
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            const std::string name = "vote";
            // (Named arguments: GCC 12 mishandles temporaries in a co_await expression.)
            const dlock::lease_key ka{name, "a"}, kb{name, "b"};
            const std::string from_a = "from-a", from_b = "from-b", late = "late";
            BOOST_TEST((co_await st.async_try_acquire(name, "a", 60s, asio::use_awaitable)).acquired);
            BOOST_TEST((co_await ops.async_proclaim(ka, from_a, asio::use_awaitable)));
            auto l = co_await ops.async_leader(name, asio::use_awaitable);
            BOOST_TEST(l.held);
            BOOST_TEST(l.value.value_or("<none>") == "from-a");
            // The same value again is written again (a proclaim is not a change detector).
            BOOST_TEST((co_await ops.async_proclaim(ka, from_a, asio::use_awaitable)));
            // Another token's proclaim writes nothing.
            BOOST_TEST(!(co_await ops.async_proclaim(kb, from_b, asio::use_awaitable)));
            BOOST_TEST(value_of(name) == "from-a");
            // a's lease ends (on the server's clock); b takes the row without a's value.
            srv().sql("UPDATE dlock.dlock_locks SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND"
                      " WHERE name = 'vote'");
            BOOST_TEST(!(co_await ops.async_proclaim(ka, late, asio::use_awaitable)));
            auto r = co_await st.async_try_acquire(name, "b", 60s, asio::use_awaitable);
            BOOST_TEST(r.acquired);
            l = co_await ops.async_leader(name, asio::use_awaitable);
            BOOST_TEST(l.held);
            BOOST_TEST(l.fencing_token == r.fencing_token);
            BOOST_TEST(!l.value.has_value(), l.value.value_or(""));
            BOOST_TEST(value_of(name) == "<null>");
            const std::string nul("x\0y", 3);
            BOOST_TEST((co_await ops.async_proclaim(kb, nul, asio::use_awaitable)));
            l = co_await ops.async_leader(name, asio::use_awaitable);
            BOOST_TEST(l.value.value_or("<none>") == nul);
            BOOST_TEST((co_await ops.async_proclaim(kb, from_b, asio::use_awaitable)));
            // A retry of b's acquire (its own row) keeps its value.
            BOOST_TEST((co_await st.async_try_acquire(name, "b", 60s, asio::use_awaitable)).acquired);
            BOOST_TEST(value_of(name) == "from-b");
            BOOST_TEST((co_await st.async_release(kb, asio::use_awaitable)));
            l = co_await ops.async_leader(name, asio::use_awaitable);
            BOOST_TEST(!l.held);
            BOOST_TEST(!l.value.has_value());
            BOOST_TEST(mariadb_family::rows(name) == 0);
            st.close();
        },
        30s);
}

// A hand-off to a queued candidate leaves the new owner no value either, and its grant
// reaches it through the doorbell.
BOOST_AUTO_TEST_CASE(a_hand_off_leaves_the_next_owner_no_value)
{
    asio::io_context io;
    dlock::mariadb_store st(io.get_executor(), srv().config());
    auto& ops = *st.elections();
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            const std::string name = "handed";
            bool ready = false, granted = false;
            auto w = st.watch(name, "b", [&](dlock::watch_event ev, const dlock::grant_notice&) {
                ready |= ev == dlock::watch_event::ready;
                granted |= ev == dlock::watch_event::granted;
            });
            BOOST_TEST(co_await eventually([&] { return ready; }));
            const dlock::lease_key ka{name, "a"}, kb{name, "b"};
            const std::string from_a = "from-a";
            BOOST_TEST((co_await st.async_try_acquire(name, "a", 60s, asio::use_awaitable)).acquired);
            BOOST_TEST((co_await ops.async_proclaim(ka, from_a, asio::use_awaitable)));
            const dlock::lease_request qb{name, "b", 60s, dlock::lease_kind::mutex, 1, true};
            BOOST_TEST(!(co_await st.async_try_acquire(qb, asio::use_awaitable)).acquired);
            BOOST_TEST((co_await st.async_release(ka, asio::use_awaitable)));
            BOOST_TEST(co_await eventually([&] { return granted; }));
            auto l = co_await ops.async_leader(name, asio::use_awaitable);
            BOOST_TEST(l.holder == "b");
            BOOST_TEST(!l.value.has_value(), l.value.value_or(""));
            st.unwatch(w);
            BOOST_TEST((co_await st.async_release(kb, asio::use_awaitable)));
            st.close();
        },
        30s);
}

#ifdef DLOCK_CLI_PATH
// `dlock elect --url mariadb://… NAME -- COMMAND` and `dlock elect --observe`: two tool
// candidates take turns, the observer prints each leader with its value, then "no leader".
BOOST_AUTO_TEST_CASE(the_tool_campaigns_and_observes_on_mariadb)
{
    auto tool = [&](std::vector<std::string> more) {
        std::vector<std::string> v{DLOCK_CLI_PATH, "elect", "--url", srv().url(), "--lease", "2s"};
        v.insert(v.end(), more.begin(), more.end());
        return v;
    };
    const std::string loop = "echo \"led $DLOCK_LEADER_VALUE $DLOCK_FENCING_TOKEN\"; while :; do sleep 0.05; done";
    child observer(tool({"--observe", "jobs"}));
    BOOST_TEST(observer.read_line(20s).value_or("<eof>") == "no leader");
    child one(tool({"--value", "cli-1", "jobs", "--", "/bin/sh", "-c", loop}));
    auto led = one.read_line(30s).value_or("<eof>");
    BOOST_TEST_REQUIRE(led.rfind("led cli-1 ", 0) == 0u, led);
    BOOST_TEST(election_scenarios::observed(observer, " cli-1") == "leader " + led.substr(10) + " cli-1");
    child two(tool({"--value", "cli-2", "jobs", "--", "/bin/sh", "-c", loop}));
    BOOST_TEST(mariadb_reaches([] { return mariadb_family::waiting("dlock:jobs"); }, 1));  // queued behind the first
    one.signal(SIGTERM);  // to its command, which dies of it; then the tool resigns
    BOOST_TEST(one.wait(20s) == 128 + SIGTERM);
    auto led2 = two.read_line(30s).value_or("<eof>");
    BOOST_TEST_REQUIRE(led2.rfind("led cli-2 ", 0) == 0u, led2);
    BOOST_TEST(std::stoull(led2.substr(10)) > std::stoull(led.substr(10)));  // a higher term
    BOOST_TEST(election_scenarios::observed(observer, " cli-2") == "leader " + led2.substr(10) + " cli-2");
    two.signal(SIGTERM);
    BOOST_TEST(two.wait(20s) == 128 + SIGTERM);
    BOOST_TEST(election_scenarios::observed(observer, "no leader") == "no leader");
    observer.signal(SIGINT);
    BOOST_TEST(observer.wait(10s) == 0);
    BOOST_TEST(mariadb_family::rows("dlock:jobs") == 0);
}
#endif

BOOST_AUTO_TEST_SUITE_END()
