// SPDX-License-Identifier: BSL-1.0
// Issue 29 item 2 across processes, as a user met it: `dlock run` A holds a name; B, started
// while A holds, gets it by hand-off and holds it for 2.5 leases. B must run to its end (a
// lease received by hand-off was lost one lease later, exit 76), and the name must be free
// at the store afterwards.
#pragma once

#include "common/child.hpp"
#include "common/redis_server.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>

namespace dlock::test {

inline void check_cli_handoff_then_long_hold(const std::string& cli, const std::string& url, const std::string& name)
{
    using namespace std::chrono_literals;
    // A lets go as soon as B is queued at the store, so B is handed the name early in its wait
    // (a hand-off late in the wait takes a fresh lease instead and hid the bug).
    const std::string until_queued = "echo held; until '" + cli + "' status --json --url '" + url + "' " + name +
                                     " | grep -q '\"queued\":[1-9]'; do sleep 0.02; done";
    child a({cli, "run", "--url", url, "--lease", "2s", name, "--", "sh", "-c", until_queued});
    auto line = a.read_line(30s);
    BOOST_REQUIRE_MESSAGE(line && *line == "held", "the first run did not start: " << line.value_or("<none>"));
    child b({cli, "run", "--url", url, "--lease", "2s", name, "--", "sh", "-c", "echo second; sleep 5"});
    BOOST_TEST(a.wait(30s) == 0);
    line = b.read_line(30s);
    BOOST_TEST((line && *line == "second"), "the second run was not handed the name");
    BOOST_TEST(b.wait(30s) == 0, "the second run lost the name it was handed (76: lease lost)");
    int status = -1;
    auto out = run_capture({cli, "run", "--url", url, "--wait", "0", name, "--", "true"}, &status);
    BOOST_TEST(status == 0, "the name stayed held at the store: " << out);
}

}  // namespace dlock::test
