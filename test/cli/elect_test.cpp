// SPDX-License-Identifier: BSL-1.0
// `dlock elect` run as a user runs it, against a redis-server the test starts: candidates
// take turns running their command, an observer prints each change, a lost leadership stops
// the command, a store without elections says so.
#include "cli/cli_support.hpp"
#include "common/scratch_dir.hpp"

#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using dlock::test::child;
using dlock::test::redis_server;
using namespace dlock::test::cli_tool;

namespace {

// A command that says "held" once it runs and exits 3 on SIGTERM.
const std::string holder_script = R"(trap 'echo got-term; exit 3' TERM; echo held; while :; do sleep 0.05; done)";

// The observer's lines until `want` (bounded: at most 8 lines).
bool observe_until(child& c, const std::string& want, std::vector<std::string>& seen)
{
    for (int i = 0; i < 8; ++i) {
        auto line = c.read_line(20s);
        if (!line)
            return false;
        seen.push_back(*line);
        if (*line == want)
            return true;
    }
    return false;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_elect)

BOOST_AUTO_TEST_CASE(candidates_take_turns_and_the_observer_prints_each_change)
{
    redis_server srv;
    auto observer = start_dlock({"elect", "--url", srv.url(), "--observe", "sched"});
    BOOST_TEST_REQUIRE(next_line(*observer) == "no leader");
    auto a =
        start_dlock({"elect", "--url", srv.url(), "--value", "node-a", "sched", "--", "/bin/sh", "-c", holder_script});
    BOOST_TEST_REQUIRE(next_line(*a) == "held");
    std::vector<std::string> seen;
    BOOST_TEST_REQUIRE(observe_until(*observer, "leader 1 node-a", seen));
    // B waits behind A (queued at the server), then runs with its term and value.
    auto b = start_dlock({"elect", "--url", srv.url(), "--value", "node-b", "sched", "--", "/bin/sh", "-c",
                          "echo \"$DLOCK_NAME $DLOCK_LEADER_VALUE $DLOCK_FENCING_TOKEN\""});
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (status_json(srv, "sched")["queued"].as_int64() != 1 && std::chrono::steady_clock::now() < deadline) {
    }
    BOOST_TEST_REQUIRE(status_json(srv, "sched")["queued"].as_int64() == 1);
    a->signal(SIGTERM);  // forwarded to A's command, which exits 3; A resigns
    BOOST_TEST(next_line(*a) == "got-term");
    BOOST_TEST(a->wait() == 3);
    BOOST_TEST(next_line(*b) == "sched node-b 2");
    BOOST_TEST(b->wait() == 0);
    BOOST_TEST(observe_until(*observer, "leader 2 node-b", seen));
    BOOST_TEST(observe_until(*observer, "no leader", seen));  // B resigned when its command exited
    observer->signal(SIGINT);
    BOOST_TEST(observer->wait() == 0);
    BOOST_TEST(status_json(srv, "sched")["held"].as_bool() == false);
}

BOOST_AUTO_TEST_CASE(the_observer_prints_json_lines)
{
    redis_server srv;
    auto observer = start_dlock({"elect", "--url", srv.url(), "--observe", "--json", "sched"});
    BOOST_TEST(next_line(*observer) == R"({"leader":false})");
    auto r = dlock_cli({"elect", "--url", srv.url(), "--value", "x y", "sched", "--", "true"});
    BOOST_TEST(r.status == 0, r.out);
    std::vector<std::string> seen;
    BOOST_TEST(observe_until(*observer, R"({"leader":true,"term":1,"value":"x y"})", seen));
    observer->signal(SIGTERM);
    BOOST_TEST(observer->wait() == 0);
}

BOOST_AUTO_TEST_CASE(a_lost_leadership_stops_the_command)
{
    redis_server srv;
    auto leader = start_dlock_merged(
        {"elect", "--url", srv.url(), "--lease", "900ms", "sched", "--", "/bin/sh", "-c", holder_script});
    BOOST_TEST_REQUIRE(next_line(*leader) == "held");
    BOOST_TEST(dlock_cli({"release", "--url", srv.url(), "--force", "sched"}).status == 0);
    std::string line;
    for (int i = 0; i < 4 && line != "got-term"; ++i)
        line = next_line(*leader);
    BOOST_TEST(line == "got-term");
    BOOST_TEST(leader->wait() == 76);
}

// --rejoin: the lost leadership stops the command, dlock campaigns again and runs it again
// with a higher term; the command's own exit (0 the second time) ends dlock.
BOOST_AUTO_TEST_CASE(a_rejoining_candidate_runs_the_command_again_after_a_loss)
{
    redis_server srv;
    const std::string dir = dlock::test::scratch_dir("dlock-rejoin");
    const std::string mark = std::string(dir) + "/ran";
    // The first run marks itself and holds until SIGTERM; the second says its term and exits 0.
    const std::string script =
        "echo term $DLOCK_FENCING_TOKEN; [ -e " + mark + " ] && exit 0; touch " + mark + "; " + holder_script;
    auto leader = start_dlock_merged(
        {"elect", "--url", srv.url(), "--lease", "900ms", "--rejoin", "sched", "--", "/bin/sh", "-c", script});
    BOOST_TEST_REQUIRE(next_line(*leader) == "term 1");
    BOOST_TEST_REQUIRE(next_line(*leader) == "held");
    BOOST_TEST(dlock_cli({"release", "--url", srv.url(), "--force", "sched"}).status == 0);
    std::vector<std::string> lines;
    for (int i = 0; i < 6 && (lines.empty() || lines.back().rfind("term ", 0) != 0); ++i)
        lines.push_back(next_line(*leader));
    BOOST_TEST((std::find(lines.begin(), lines.end(), "got-term") != lines.end()));
    BOOST_TEST(lines.back() == "term 2");
    BOOST_TEST(leader->wait() == 0);
    BOOST_TEST(status_json(srv, "sched")["held"].as_bool() == false);
}

BOOST_AUTO_TEST_CASE(a_store_without_elections_or_a_name_of_another_kind_is_refused)
{
    redis_server srv;
    auto r = dlock_cli({"elect", "--url", srv.url(), "--no-scripting", "sched", "--", "true"});
    BOOST_TEST(r.status == 69, r.out);
    BOOST_TEST(has(r.out, "keeps no elections"), r.out);
    auto holder = start_dlock({"run", "--url", srv.url(), "--shared", "sched", "--", "/bin/sh", "-c", holder_script});
    BOOST_TEST_REQUIRE(next_line(*holder) == "held");
    auto k = dlock_cli({"elect", "--url", srv.url(), "sched", "--", "true"});
    BOOST_TEST(k.status == 65, k.out);
    BOOST_TEST(has(k.out, "not an election"), k.out);
    holder->signal(SIGTERM);
    BOOST_TEST(holder->wait() == 3);
}

BOOST_AUTO_TEST_SUITE_END()
