// SPDX-License-Identifier: BSL-1.0
// Elections on a real etcd cluster, in etcd's concurrency.Election layout: the scenarios
// every store with elections runs; candidates of two stores take turns while an observer
// sees each leader with its value; `etcdctl elect` and dlock's election exclude each other,
// and each side's observer sees the other's leader and value.
#include "common/child.hpp"
#include "integration/consensus/etcd_family.hpp"
#include "integration/election_scenarios.hpp"
#include "integration/support.hpp"

#include <signal.h>

using namespace dlock::test;  // its asio alias and chrono literals too

namespace {

dlock::etcd::config config_of(const etcd_cluster& c)
{
    return etcd_family::config_of(c.url());
}

std::vector<std::string> etcdctl(const etcd_cluster& c, std::vector<std::string> args)
{
    std::vector<std::string> argv{"/usr/bin/env", "ETCDCTL_API=3", "etcdctl", "--endpoints=" + c.endpoints_csv()};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
}

// etcdctl prints a leader as two lines, its key then its value: the value of the first
// leader whose value is not empty (dlock's candidate is empty until it proclaims).
std::optional<std::pair<std::string, std::string>> next_leader(child& c, std::chrono::milliseconds limit)
{
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
        auto key = c.read_line(limit);
        auto value = key ? c.read_line(limit) : std::nullopt;
        if (!value)
            return std::nullopt;
        if (!value->empty())
            return std::pair(*key, *value);
    }
    return std::nullopt;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(etcd_election)

// The scenarios every store with elections runs (election_scenarios.hpp), on one cluster: a
// leader's loss is its lease's end, noticed by its own deadline.
BOOST_AUTO_TEST_CASE(one_leader_at_a_time_failover_after_kill_and_pause)
{
    etcd_cluster c;
    auto url = c.url();
    election_scenarios::store_factory make = [&](asio::io_context& io) {
        return std::make_unique<dlock::etcd_store>(io.get_executor(), etcd_family::config_of(url));
    };
    election_scenarios::one_leader_at_a_time_by_the_leaders_own_account(url);
    election_scenarios::failover_after_the_leader_is_killed_and_observers_see_no_leader(url, make);
    election_scenarios::a_paused_leader_learns_on_resume_that_it_lost_with_a_lower_term(url, make);
}

BOOST_AUTO_TEST_CASE(candidates_take_turns_and_the_observer_sees_each_leader)
{
    etcd_cluster c;
    asio::io_context io;
    dlock::etcd_store a_store(io.get_executor(), config_of(c)), b_store(io.get_executor(), config_of(c));
    dlock::registry a(a_store, {.lease = 3s}), b(b_store, {.lease = 3s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            // The leader's key is etcd's Election key, its value the proclaimed one.
            auto layout = [&](const dlock::leadership& la) -> asio::awaitable<void> {
                auto st = co_await a_store.async_status("dlock:lead", asio::use_awaitable);
                BOOST_TEST(st.key.rfind("dlock:lead/", 0) == 0, st.key);
                BOOST_TEST(st.fencing_token == la.term());
                auto kv = c.etcdctl({"get", "--prefix", "dlock:lead/"});
                BOOST_TEST(kv == st.key + "\nalpha", kv);
            };
            co_await election_scenarios::candidates_take_turns_while_one_observes(a_store, a, b, layout);
            co_await election_scenarios::a_rejoining_candidate_leads_again_after_its_term_is_taken(a_store, a);
            a_store.close();
            b_store.close();
        },
        60s);
}

// The store's side of a leader: the candidate's key has no value until proclaimed, and its
// renewals, a retried acquire and its release know it by its create revision, not its value.
BOOST_AUTO_TEST_CASE(a_leaders_key_is_known_by_its_create_revision)
{
    etcd_cluster c;
    asio::io_context io;
    dlock::etcd_store st(io.get_executor(), config_of(c));
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto use = asio::use_awaitable;
            dlock::lease_request req{.name = "n", .token = "tok-1", .ttl = 3s, .kind = dlock::lease_kind::leader};
            auto r = co_await st.async_try_acquire(req, use);
            BOOST_TEST_REQUIRE(r.acquired);
            auto before = co_await st.async_leader("n", use);
            BOOST_TEST(before.held);
            BOOST_TEST(!before.value.has_value(), "a value before any proclaim: " << before.value.value_or(""));
            dlock::lease_key k{"n", "tok-1", r.lease_ref, dlock::lease_kind::leader};
            BOOST_TEST(co_await st.async_proclaim(k, "v1", use));
            auto after = co_await st.async_leader("n", use);
            BOOST_TEST(after.value.value_or("<none>") == "v1");
            BOOST_TEST(after.fencing_token == r.fencing_token);
            BOOST_TEST((co_await st.async_renew(k, 3s, use)).owned);
            auto again = co_await st.async_try_acquire(req, use);  // a retry of the same lease
            BOOST_TEST(again.acquired);
            BOOST_TEST(again.fencing_token == r.fencing_token);
            // An operator deletes the key: the old leader's proclaim and renewal are refused.
            BOOST_TEST(co_await st.async_force_release("n", use));
            BOOST_TEST(!co_await st.async_proclaim(k, "v2", use));
            BOOST_TEST(!(co_await st.async_renew(k, 3s, use)).owned);
            BOOST_TEST(!(co_await st.async_leader("n", use)).held);
            // A mutex on the store still puts its token and is known by it.
            dlock::lease_request m{.name = "m", .token = "tok-2", .ttl = 3s};
            auto mr = co_await st.async_try_acquire(m, use);
            BOOST_TEST_REQUIRE(mr.acquired);
            BOOST_TEST(c.etcdctl({"get", "--print-value-only", mr.lease_ref}) == "tok-2");
            dlock::lease_key mk{"m", "tok-2", mr.lease_ref};  // named: GCC 12 frees a temporary twice across co_await
            BOOST_TEST(co_await st.async_release(mk, use));
            st.close();
        },
        30s);
}

// `etcdctl elect NAME VALUE` and dlock's election on one name: never both lead; each side's
// observer (`etcdctl elect -l`, election::observe) sees the other's leader and value.
BOOST_AUTO_TEST_CASE(interop_with_etcdctl_elect)
{
    etcd_cluster c;
    asio::io_context io;
    dlock::etcd_store store(io.get_executor(), config_of(c));
    dlock::registry reg(store, {.lease = 3s});
    const std::string name = "dlock:shared";  // the registry's prefix, as etcdctl must spell it
    child go1(etcdctl(c, {"elect", name, "go-1"}));
    auto led = next_leader(go1, 30s);
    BOOST_REQUIRE(led);
    BOOST_TEST(led->second == "go-1");
    child watcher(etcdctl(c, {"elect", "-l", name}));
    auto seen_go1 = next_leader(watcher, 30s);
    BOOST_REQUIRE(seen_go1);
    BOOST_TEST(seen_go1->second == "go-1");
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            dlock::election e(reg, "shared");
            auto seen = co_await e.leader();
            BOOST_TEST(seen.present);
            BOOST_TEST(seen.value == "go-1");
            // dlock campaigns behind etcdctl's leader and leads only once it resigns (SIGINT).
            std::optional<dlock::leadership> mine;
            task_group tasks(io.get_executor());
            auto campaign = [&]() -> asio::awaitable<void> { mine = co_await e.campaign("dlock-1"); };
            tasks.spawn(campaign());
            auto queued = co_await status_until(store, name, [](auto& s) { return s.queued == 1; });
            BOOST_TEST(queued.queued == 1u);
            BOOST_TEST(!mine.has_value(), "dlock led while etcdctl did");
            go1.signal(SIGINT);
            co_await tasks.join();
            BOOST_REQUIRE(mine.has_value());
            BOOST_TEST(mine->is_leader());
            BOOST_TEST(mine->term() > seen.term);
            BOOST_TEST(go1.wait(10s) == 0);
            // etcdctl's observer sees dlock's leader key with its value.
            auto seen_dlock = next_leader(watcher, 30s);
            BOOST_REQUIRE(seen_dlock);
            auto st = co_await store.async_status(name, asio::use_awaitable);
            BOOST_TEST(seen_dlock->first == st.key);
            BOOST_TEST(seen_dlock->second == "dlock-1");
            // An etcdctl candidate waits behind dlock's leader, and leads once it resigns.
            child go2(etcdctl(c, {"elect", name, "go-2"}));
            auto obs = e.observe();
            auto now = co_await obs.async_next();
            BOOST_TEST(now.value == "dlock-1");
            co_await status_until(store, name, [](auto& s) { return s.queued == 1; });
            auto term = mine->term();
            co_await mine->resign();
            auto go2_led = next_leader(go2, 30s);
            BOOST_REQUIRE(go2_led);
            BOOST_TEST(go2_led->second == "go-2");
            dlock::leader_info next;
            for (int i = 0; i < 4 && next.value != "go-2"; ++i)
                next = co_await obs.async_next();
            BOOST_TEST(next.value == "go-2");
            BOOST_TEST(next.term > term);
            go2.signal(SIGINT);
            BOOST_TEST(go2.wait(10s) == 0);
            co_await reg.async_drain();
            store.close();
        },
        120s);
}

// `dlock elect --prefix '' NAME -- COMMAND` and `etcdctl elect NAME`: the tool's command
// runs only once etcdctl's leader resigns; `dlock elect --observe` and `etcdctl elect -l`
// each print the other's leader and value.
BOOST_AUTO_TEST_CASE(the_tool_campaigns_against_etcdctl_elect)
{
    etcd_cluster c;
    child go(etcdctl(c, {"elect", "jobs", "go-1"}));
    BOOST_REQUIRE(next_leader(go, 30s));
    auto tool = [&](std::vector<std::string> more) {
        std::vector<std::string> v{DLOCK_CLI_PATH, "elect", "--url", c.url(), "--prefix", "", "--lease", "2s"};
        v.insert(v.end(), more.begin(), more.end());
        return v;
    };
    child observer(tool({"--observe", "jobs"}));
    BOOST_TEST(election_scenarios::observed(observer, " go-1").rfind("leader ", 0) == 0u);
    child candidate(tool({"--value", "dlock-cli", "jobs", "--", "/bin/sh", "-c",
                          "echo \"led $DLOCK_LEADER_VALUE\"; while :; do sleep 0.05; done"}));
    // Queued behind etcdctl's leader: its key is the second under the name.
    auto deadline = std::chrono::steady_clock::now() + 20s;
    auto keys = [&] {
        auto out = c.etcdctl({"get", "--prefix", "jobs/", "--keys-only"});
        std::size_t n = 0;
        for (auto at = out.find("jobs/"); at != std::string::npos; at = out.find("jobs/", at + 1))
            ++n;
        return n;
    };
    while (keys() < 2 && std::chrono::steady_clock::now() < deadline) {
    }
    BOOST_TEST_REQUIRE(keys() == 2u);
    go.signal(SIGINT);  // etcdctl resigns
    BOOST_TEST(go.wait(10s) == 0);
    BOOST_TEST(candidate.read_line(30s).value_or("<eof>") == "led dlock-cli");
    BOOST_TEST(election_scenarios::observed(observer, " dlock-cli").rfind("leader ", 0) == 0u);
    child watcher(etcdctl(c, {"elect", "-l", "jobs"}));
    auto seen = next_leader(watcher, 30s);
    BOOST_REQUIRE(seen);
    BOOST_TEST(seen->second == "dlock-cli");
    candidate.signal(SIGTERM);  // to its command, which dies of it; then the tool resigns
    BOOST_TEST(candidate.wait(20s) == 128 + SIGTERM);
    BOOST_TEST(election_scenarios::observed(observer, "no leader") == "no leader");
    observer.signal(SIGINT);
    BOOST_TEST(observer.wait(10s) == 0);
}

BOOST_AUTO_TEST_SUITE_END()
