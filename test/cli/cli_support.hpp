// SPDX-License-Identifier: BSL-1.0
// Helpers shared by the CLI tests: run the dlock tool as a user would and read what it says.
#pragma once

#include "cli/child_process.hpp"
#include "common/child.hpp"
#include "common/redis_server.hpp"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <memory>
#include <string>
#include <vector>

namespace dlock::test::cli_tool {

struct outcome {
    int status = -1;
    std::string out;  // stdout and stderr together
};

// Runs dlock to completion (capped by timeout(1) so a hang fails instead of blocking).
inline outcome dlock_cli(std::vector<std::string> args)
{
    std::vector<std::string> argv{"/bin/sh", "-c", "exec timeout -s KILL 60 \"$0\" \"$@\" 2>&1", DLOCK_CLI_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    int st = 0;
    outcome r;
    r.out = run_capture(argv, &st);
    r.status = dlock::cli::exit_status_of(st);
    return r;
}

// A dlock process whose stdout (and its command's) the test reads line by line.
inline std::unique_ptr<child> start_dlock(std::vector<std::string> args)
{
    args.insert(args.begin(), DLOCK_CLI_PATH);
    return std::make_unique<child>(args);
}

// The same with dlock's stderr on that stdout too; `exec` keeps dlock's pid the child's.
inline std::unique_ptr<child> start_dlock_merged(std::vector<std::string> args)
{
    std::vector<std::string> argv{"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>&1", DLOCK_CLI_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    return std::make_unique<child>(argv);
}

// The child's next stdout line, "<eof>" if none came within the limit.
inline std::string next_line(child& c)
{
    return c.read_line().value_or("<eof>");
}

inline bool has(const std::string& s, const std::string& part)
{
    return s.find(part) != std::string::npos;
}

inline boost::json::object status_json(const redis_server& srv, const std::string& name)
{
    auto r = dlock_cli({"status", "--url", srv.url(), "--json", name});
    BOOST_TEST_REQUIRE(r.status == 0, r.out);
    return boost::json::parse(r.out).as_object();
}

}  // namespace dlock::test::cli_tool
