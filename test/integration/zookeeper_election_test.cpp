// SPDX-License-Identifier: BSL-1.0
// Elections on a real ZooKeeper ensemble, in Curator's LeaderLatch layout: candidates of two
// stores take turns and an observer sees each leader with its value; the name is refused as
// a lock; Curator's LeaderLatch and dlock's election exclude each other and each sees the
// other's leader.
#include "integration/consensus/zookeeper_family.hpp"
#include "integration/curator.hpp"
#include "integration/election_scenarios.hpp"
#include "integration/support.hpp"

#include <sys/wait.h>


using namespace dlock::test;  // its asio alias and chrono literals too

namespace {

dlock::zookeeper::config config_of(const zk_ensemble& z)
{
    return zookeeper_family::config_of(z.url("?session_timeout=4s"));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zookeeper_election)

// The scenarios every store with elections runs (election_scenarios.hpp), on one ensemble:
// a leader's loss is its session's end (2 s here), noticed by its own deadline.
BOOST_AUTO_TEST_CASE(one_leader_at_a_time_failover_after_kill_and_pause)
{
    zk_ensemble z;
    auto url = z.url("?session_timeout=2s");
    election_scenarios::store_factory make = [&](asio::io_context& io) {
        return std::make_unique<dlock::zookeeper_store>(io.get_executor(), zookeeper_family::config_of(url));
    };
    election_scenarios::one_leader_at_a_time_by_the_leaders_own_account(url);
    // An observer here cannot know when the killed leader's session ran out (the servers
    // tell no client another session's timeout): "no leader" in between is not promised.
    election_scenarios::failover_after_the_leader_is_killed_and_observers_see_no_leader(url, make, false);
    election_scenarios::a_paused_leader_learns_on_resume_that_it_lost_with_a_lower_term(url, make);
}

BOOST_AUTO_TEST_CASE(candidates_take_turns_and_the_observer_sees_each_leader)
{
    zk_ensemble z;
    asio::io_context io;
    dlock::zookeeper_store a_store(io.get_executor(), config_of(z)), b_store(io.get_executor(), config_of(z));
    dlock::registry a(a_store, {.lease = 3s}), b(b_store, {.lease = 3s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            // The path is an election's: its nodes are LeaderLatch's, and a lock is refused.
            auto layout = [&](const dlock::leadership&) -> asio::awaitable<void> {
                auto s = co_await a_store.async_status("dlock:lead", asio::use_awaitable);
                BOOST_TEST((s.kind == dlock::lease_kind::leader));
                BOOST_TEST(s.key.find("-latch-") != std::string::npos, s.key);
                auto [mec, mg] = co_await b.obtain("lead").try_acquire(asio::as_tuple(asio::use_awaitable));
                BOOST_TEST(mec == dlock::error::kind_mismatch, mec.message());
                BOOST_TEST(b_store.last_error_text().find("an election") != std::string::npos,
                           b_store.last_error_text());
            };
            co_await election_scenarios::candidates_take_turns_while_one_observes(a_store, a, b, layout);
            co_await election_scenarios::a_rejoining_candidate_leads_again_after_its_term_is_taken(a_store, a);
            a_store.close();
            b_store.close();
        },
        60s);
}

// LeaderLatch (Java) and dlock's election on one path: never both lead; each sees the other's
// leader with its value (LeaderLatch's participant id is the node's data, as dlock's value).
BOOST_AUTO_TEST_CASE(interop_with_curators_leader_latch)
{
    zk_ensemble z;
    curator_dir();
    asio::io_context io;
    dlock::zookeeper_store store(io.get_executor(), config_of(z));
    dlock::registry reg(store, {.lease = 3s});
    child java(curator({"latch", z.connect_string(), "/dlock/dlock:latched", "java-1", "3000"}));
    BOOST_REQUIRE(java.read_line(60s).value_or("") == "waiting");
    auto line = java.read_line(60s);
    BOOST_REQUIRE((line && line->rfind("acquired ", 0) == 0));
    std::uint64_t java_term = std::stoull(line->substr(9));
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            dlock::election e(reg, "latched");
            auto seen = co_await e.leader();
            BOOST_TEST(seen.present);
            BOOST_TEST(seen.value == "java-1");  // Curator's participant id
            BOOST_TEST(seen.term == java_term);
            // dlock waits for Curator's leader to close its latch, then leads.
            auto l = co_await e.campaign("dlock-1");
            BOOST_TEST(l.term() > java_term);
            BOOST_TEST(java.read_line(10s).value_or("") == "released");
            int status = -1;
            auto out = run_capture(curator({"leader-of", z.connect_string(), "/dlock/dlock:latched"}), &status);
            BOOST_TEST(out == "leader dlock-1", out);
            // A Curator candidate queues behind dlock's leader and leads only after it resigns.
            child later(curator({"latch", z.connect_string(), "/dlock/dlock:latched", "java-2", "10"}));
            BOOST_TEST(later.read_line(60s).value_or("") == "waiting");
            auto queued = co_await status_until(store, "dlock:latched", [](auto& s) { return s.queued == 1; });
            BOOST_TEST(queued.queued == 1u);
            auto term = l.term();
            co_await l.resign();
            auto got = later.read_line(30s);
            BOOST_REQUIRE((got && got->rfind("acquired ", 0) == 0));
            BOOST_TEST(std::stoull(got->substr(9)) > term);
            BOOST_TEST(later.read_line(10s).value_or("") == "released");
            BOOST_TEST(later.wait() == 0);
            co_await reg.async_drain();
            store.close();
        },
        120s);
    BOOST_TEST(java.wait() == 0);
}

#ifdef DLOCK_CLI_PATH
// The tool on ZooKeeper: `dlock elect` runs its command while leading and an observer prints
// it; meanwhile the name refuses `dlock run` (an election's, status 65) and status calls it
// an election; the command's end resigns.
BOOST_AUTO_TEST_CASE(the_tool_elects_and_observes)
{
    zk_ensemble z(1);
    auto url = z.url("?session_timeout=4s");
    auto tool = [&](std::vector<std::string> args, std::string& out) {
        std::vector<std::string> argv{"/bin/sh", "-c", "exec timeout -s KILL 60 \"$0\" \"$@\" 2>&1", DLOCK_CLI_PATH};
        argv.insert(argv.end(), args.begin(), args.end());
        int status = -1;
        out = run_capture(argv, &status);
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    };
    child observer({DLOCK_CLI_PATH, "elect", "--url", url, "--observe", "sched"});
    BOOST_TEST(observer.read_line(30s).value_or("<eof>") == "no leader");
    child leader({DLOCK_CLI_PATH, "elect", "--url", url, "--value", "node-a", "sched", "--", "/bin/sh", "-c",
                  "trap 'exit 0' TERM; echo \"led $DLOCK_LEADER_VALUE\"; while :; do sleep 0.05; done"});
    BOOST_TEST(leader.read_line(30s).value_or("<eof>") == "led node-a");
    std::string line;
    for (int i = 0; i < 4 && line.rfind("leader ", 0) != 0; ++i)
        line = observer.read_line(30s).value_or("<eof>");
    BOOST_TEST(line.size() > 7u);
    BOOST_TEST(line.substr(line.size() - 7) == " node-a", line);
    std::string out;
    BOOST_TEST(tool({"run", "--url", url, "sched", "--", "true"}, out) == 65, out);
    BOOST_TEST(out.find("an election") != std::string::npos, out);
    BOOST_TEST(tool({"status", "--url", url, "--json", "sched"}, out) == 0, out);
    BOOST_TEST(out.find("\"kind\":\"election\"") != std::string::npos, out);
    leader.signal(SIGTERM);  // to its command, which exits 0; the tool resigns
    BOOST_TEST(leader.wait(30s) == 0);
    for (int i = 0; i < 4 && line != "no leader"; ++i)
        line = observer.read_line(30s).value_or("<eof>");
    BOOST_TEST(line == "no leader");
    observer.signal(SIGINT);
    BOOST_TEST(observer.wait(30s) == 0);
}
#endif

BOOST_AUTO_TEST_SUITE_END()
