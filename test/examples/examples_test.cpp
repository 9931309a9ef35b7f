// The examples as a user runs them: real processes against a redis-server each test starts.
// Every wait is on a child's output or exit, bounded; nothing sleeps to synchronise.
#include <dlock/error.hpp>

#include "common/child.hpp"
#include "common/redis_server.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using dlock::test::child;
using dlock::test::redis_server;

namespace {

bool starts_with(const std::optional<std::string>& line, std::string_view prefix)
{
    return line && line->compare(0, prefix.size(), prefix) == 0;
}

// Every line the child prints until it exits (bounded), then its exit status.
std::vector<std::string> all_lines(child& c, int& status, std::chrono::milliseconds limit = 30s)
{
    std::vector<std::string> lines;
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (auto line = c.read_line(std::chrono::duration_cast<std::chrono::milliseconds>(
               deadline - std::chrono::steady_clock::now())))
        lines.push_back(*line);
    status = c.wait(1s);
    return lines;
}

long long ms_since(std::chrono::steady_clock::time_point start)
{
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
}

std::string joined(const std::vector<std::string>& lines)
{
    std::string out;
    for (auto& l : lines)
        out += l + "\n";
    return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(quickstart)

BOOST_AUTO_TEST_CASE(prints_increasing_tokens_and_leaves_no_lock)
{
    redis_server srv;
    std::uint64_t previous = 0;
    for (int run = 0; run < 2; ++run) {
        child c({DLOCK_EXAMPLE_QUICKSTART, srv.url()});
        auto line = c.read_line(20s);
        BOOST_TEST_INFO("output: " << line.value_or("<none>"));
        BOOST_REQUIRE(starts_with(line, "fencing token "));
        auto token = std::stoull(line->substr(14));
        BOOST_TEST(token > previous);
        previous = token;
        BOOST_TEST(c.wait(20s) == 0);
    }
    // Released, not left to expire: no lock key remains.
    BOOST_TEST(srv.cli({"EVAL", "return #redis.call('KEYS', ARGV[1])", "0", "*lock:*orders:42"}) == "0");
}

BOOST_AUTO_TEST_CASE(bad_url_is_one_line_and_exit_2)
{
    child c({DLOCK_EXAMPLE_QUICKSTART, "http://127.0.0.1:6379"});
    int status = 0;
    auto lines = all_lines(c, status, 10s);
    BOOST_TEST(status == 2);
    BOOST_TEST(lines.empty(), "stdout: " << joined(lines));
}

BOOST_AUTO_TEST_CASE(unreachable_redis_fails_fast)
{
    auto port = dlock::test::free_port();  // nobody listens there
    auto start = std::chrono::steady_clock::now();
    child c({DLOCK_EXAMPLE_QUICKSTART, "redis://127.0.0.1:" + std::to_string(port)});
    int status = 0;
    auto lines = all_lines(c, status, 20s);
    BOOST_TEST(status == 1);
    BOOST_TEST(lines.empty(), "stdout: " << joined(lines));
    BOOST_TEST(ms_since(start) < 10000);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(fencing)

BOOST_AUTO_TEST_CASE(late_write_is_rejected)
{
    redis_server srv;
    child c({DLOCK_EXAMPLE_FENCING, "--url", srv.url()});
    int status = -1;
    auto lines = all_lines(c, status, 30s);
    auto out = joined(lines);
    BOOST_TEST_MESSAGE("fencing output:\n" << out);
    BOOST_TEST(status == 0);
    // A writes first (accepted), B writes with a higher token (accepted), A's late write fails.
    std::uint64_t token_a = 0, token_b = 0;
    std::vector<std::string> writes;
    for (auto& l : lines) {
        if (l.rfind("A acquired token ", 0) == 0)
            token_a = std::stoull(l.substr(17));
        if (l.rfind("B acquired token ", 0) == 0)
            token_b = std::stoull(l.substr(17));
        if (l.find(" writes with token ") != std::string::npos)
            writes.push_back(l);
    }
    BOOST_TEST(token_b > token_a);
    BOOST_REQUIRE(writes.size() == 3u);
    BOOST_TEST(writes[0] == "A writes with token " + std::to_string(token_a) + ": accepted");
    BOOST_TEST(writes[1] == "B writes with token " + std::to_string(token_b) + ": accepted");
    BOOST_TEST(writes[2] == "A writes with token " + std::to_string(token_a) + ": rejected (stale token)");
    BOOST_TEST(out.find("A release: " + dlock::make_error_code(dlock::error::lock_lost).message()) != std::string::npos);
    BOOST_TEST(out.find("storage holds: written by B") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(unreachable_redis_is_an_error)
{
    auto port = dlock::test::free_port();
    child c({DLOCK_EXAMPLE_FENCING, "--url", "redis://127.0.0.1:" + std::to_string(port)});
    BOOST_TEST(c.wait(20s) == 1);
}

BOOST_AUTO_TEST_SUITE_END()
