// The examples as a user runs them: real processes against a redis-server each test starts.
// Every wait is on a child's output or exit, bounded; nothing sleeps to synchronise.
#include <dlock/error.hpp>

#include "common/child.hpp"
#include "common/redis_server.hpp"

#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
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

// Several children's stdout, merged: waits for a line that matches, from any of them, and
// keeps the others for later waits. Each child is read in turn with a short poll() limit.
class fleet {
public:
    struct event {
        std::size_t who;
        std::string line;
    };

    std::size_t start(const std::vector<std::string>& argv)
    {
        procs_.push_back(std::make_unique<child>(argv));
        return procs_.size() - 1;
    }
    child& operator[](std::size_t i) { return *procs_[i]; }
    std::size_t size() const noexcept { return procs_.size(); }

    template <class Pred>
    std::optional<event> wait_for(Pred pred, std::chrono::milliseconds limit = 20s)
    {
        auto deadline = std::chrono::steady_clock::now() + limit;
        for (;;) {
            for (auto it = backlog_.begin(); it != backlog_.end(); ++it) {
                if (pred(*it)) {
                    auto e = *it;
                    backlog_.erase(it);
                    return e;
                }
            }
            if (std::chrono::steady_clock::now() >= deadline)
                return std::nullopt;
            for (std::size_t i = 0; i < procs_.size(); ++i) {
                if (procs_[i]->pid() <= 0)
                    continue;
                while (auto line = procs_[i]->read_line(10ms)) {
                    BOOST_TEST_MESSAGE("[" << i << "] " << *line);
                    backlog_.push_back({i, *line});
                }
            }
        }
    }

    // The lines not consumed by wait_for, oldest first.
    const std::deque<event>& backlog() const noexcept { return backlog_; }

private:
    std::vector<std::unique_ptr<child>> procs_;
    std::deque<event> backlog_;
};

std::vector<std::string> words(const std::string& line)
{
    std::istringstream in(line);
    std::vector<std::string> out;
    for (std::string w; in >> w;)
        out.push_back(w);
    return out;
}

std::string temp_dir()
{
    char dir[] = "/tmp/dlock-examples-XXXXXX";
    BOOST_REQUIRE(::mkdtemp(dir));
    return dir;
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

BOOST_AUTO_TEST_SUITE(leader_election)

namespace {

std::vector<std::string> instance(const redis_server& srv, const std::string& id, const std::string& file,
                                  std::vector<std::string> extra = {})
{
    std::vector<std::string> argv{DLOCK_EXAMPLE_LEADER_ELECTION, "--url", srv.url(), "--id", id, "--file", file,
                                  "--lease", "1s", "--period", "100ms", "--duration", "60s"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
}

// Matches "EVENT ..." lines, from one child if `who` is given.
auto is(std::string event, std::optional<std::size_t> who = {})
{
    return [=](const fleet::event& e) {
        auto w = words(e.line);
        return !w.empty() && w[0] == event && (!who || e.who == *who);
    };
}

// Matches "round ID N" from `who` with N >= n.
auto round_at_least(std::size_t who, long n)
{
    return [=](const fleet::event& e) {
        auto w = words(e.line);
        return e.who == who && w.size() == 3 && w[0] == "round" && std::stol(w[2]) >= n;
    };
}

std::uint64_t token_of(const fleet::event& e) { return std::stoull(words(e.line).at(2)); }

struct file_check {
    std::size_t lines = 0;
    std::set<std::uint64_t> tokens;     // tokens that wrote
    std::set<std::uint64_t> abandoned;  // leaderships that ended mid-round
    std::string violations;
};

// The shared file, in write order: a token is one instance's, tokens never go down (a
// stale leader never writes after a newer one), and within a leadership begin and end
// alternate. A newer token may follow an unfinished round only if that leader is gone.
file_check check_file(const std::string& path)
{
    file_check c;
    std::ifstream in(path);
    std::string id, kind;
    std::uint64_t token = 0, highest = 0;
    std::optional<std::pair<std::string, std::uint64_t>> open;
    std::map<std::uint64_t, std::string> owner;
    auto violation = [&](const std::string& what) {
        c.violations += "line " + std::to_string(c.lines) + " (" + id + " " + std::to_string(token) + " " + kind +
                        "): " + what + "\n";
    };
    while (in >> id >> token >> kind) {
        ++c.lines;
        if (token < highest)
            violation("written after token " + std::to_string(highest));
        if (token > highest) {
            if (open)
                c.abandoned.insert(open->second);
            open.reset();
            highest = token;
        }
        auto [it, fresh] = owner.emplace(token, id);
        if (it->second != id)
            violation("token also used by " + it->second);
        c.tokens.insert(token);
        if (kind == "begin") {
            if (open)
                violation("begin inside an open round");
            open.emplace(id, token);
        } else if (kind == "end") {
            if (!open || *open != std::pair(id, token))
                violation("end without its begin");
            open.reset();
        } else {
            violation("unknown kind");
        }
    }
    return c;
}

}  // namespace

BOOST_AUTO_TEST_CASE(one_leader_at_a_time_through_kill_and_pause)
{
    redis_server srv;
    const std::string file = temp_dir() + "/leader.log";
    const std::vector<std::string> ids{"a", "b", "c"};
    fleet f;
    for (auto& id : ids)
        f.start(instance(srv, id, file));
    std::set<std::uint64_t> announced;

    // Someone leads and completes rounds.
    auto first = f.wait_for(is("leader"));
    BOOST_REQUIRE(first);
    const auto l1 = first->who;
    const auto t1 = token_of(*first);
    announced.insert(t1);
    BOOST_REQUIRE(f.wait_for(round_at_least(l1, 2)));

    // SIGKILL the leader: another instance takes over once the lease (1 s) has run out.
    f[l1].signal(SIGKILL);
    const auto killed_at = std::chrono::steady_clock::now();
    BOOST_TEST(f[l1].wait(5s) == 128 + SIGKILL);
    auto second = f.wait_for(is("leader"), 10s);
    BOOST_REQUIRE(second);
    const auto takeover_ms = ms_since(killed_at);
    BOOST_TEST(takeover_ms < 3000, "took over after " << takeover_ms << " ms");
    const auto l2 = second->who;
    const auto t2 = token_of(*second);
    announced.insert(t2);
    BOOST_TEST(l2 != l1);
    BOOST_TEST(t2 > t1);
    BOOST_REQUIRE(f.wait_for(round_at_least(l2, 2)));

    // SIGSTOP the new leader: its lease runs out while it is stopped, the third takes over.
    f[l2].signal(SIGSTOP);
    auto third = f.wait_for(is("leader"), 10s);
    if (!third)
        f[l2].signal(SIGCONT);
    BOOST_REQUIRE(third);
    const auto l3 = third->who;
    const auto t3 = token_of(*third);
    announced.insert(t3);
    BOOST_TEST((l3 != l1 && l3 != l2));
    BOOST_TEST(t3 > t2);
    auto l3_round = f.wait_for(round_at_least(l3, 1));
    BOOST_REQUIRE(l3_round);

    // Resumed, the paused leader finds out its lease ended and stops its job, writing nothing.
    f[l2].signal(SIGCONT);
    auto lost = f.wait_for(is("lost", l2), 10s);
    BOOST_REQUIRE(lost);
    BOOST_TEST(lost->line == "lost " + ids[l2] + " " + std::to_string(t2));
    // The new leader carries on meanwhile (two more rounds after the resumed one stopped).
    BOOST_REQUIRE(f.wait_for(round_at_least(l3, std::stol(words(l3_round->line)[2]) + 2)));
    BOOST_TEST(!f.wait_for(is("leader", l2), 0ms).has_value(), "the paused leader led again too early");

    // Leave: the follower first, then the leader, which finishes its round and resigns.
    f[l2].signal(SIGTERM);
    auto l2_done = f.wait_for(is("done", l2), 10s);
    BOOST_TEST(l2_done.has_value());
    BOOST_TEST(f[l2].wait(5s) == 0);
    f[l3].signal(SIGTERM);
    auto resigned = f.wait_for(is("resigned", l3), 10s);
    BOOST_REQUIRE(resigned);
    BOOST_TEST(resigned->line == "resigned " + ids[l3] + " " + std::to_string(t3));
    BOOST_TEST(f.wait_for(is("done", l3), 10s).has_value());
    BOOST_TEST(f[l3].wait(5s) == 0);
    for (auto& e : f.backlog())
        if (words(e.line).at(0) == "leader")
            announced.insert(token_of(e));

    auto c = check_file(file);
    BOOST_TEST_MESSAGE("file: " << c.lines << " lines, " << c.tokens.size() << " leaderships");
    BOOST_TEST(c.violations.empty(), c.violations);
    BOOST_TEST(c.tokens.count(t1) + c.tokens.count(t2) + c.tokens.count(t3) == 3u);
    for (auto t : c.tokens)
        BOOST_TEST(announced.count(t) == 1u, "token " << t << " wrote but was never announced");
    // Only the killed and the paused leader may have left a round unfinished.
    for (auto t : c.abandoned)
        BOOST_TEST((t == t1 || t == t2), "leadership " << t << " stopped mid-round");
}

BOOST_AUTO_TEST_CASE(rounds_flag_ends_the_run)
{
    redis_server srv;
    const std::string file = temp_dir() + "/leader.log";
    child c(instance(srv, "solo", file, {"--rounds", "3", "--period", "20ms"}));
    int status = -1;
    auto lines = all_lines(c, status, 20s);
    BOOST_TEST(status == 0);
    BOOST_TEST_REQUIRE(lines.size() == 6u, joined(lines));
    auto token = words(lines[0]).at(2);
    BOOST_TEST(lines[0] == "leader solo " + token);
    BOOST_TEST(lines[1] == "round solo 1");
    BOOST_TEST(lines[3] == "round solo 3");
    BOOST_TEST(lines[4] == "resigned solo " + token);
    BOOST_TEST(lines[5] == "done solo 3");
    auto check = check_file(file);
    BOOST_TEST(check.lines == 6u);
    BOOST_TEST(check.violations.empty(), check.violations);
    BOOST_TEST(check.abandoned.empty());
}

BOOST_AUTO_TEST_CASE(bad_flags_exit_2)
{
    child no_file({DLOCK_EXAMPLE_LEADER_ELECTION, "--url", "redis://127.0.0.1:1"});
    BOOST_TEST(no_file.wait(10s) == 2);
    child bad_lease({DLOCK_EXAMPLE_LEADER_ELECTION, "--file", "/dev/null", "--lease", "soon"});
    BOOST_TEST(bad_lease.wait(10s) == 2);
    child bad_url({DLOCK_EXAMPLE_LEADER_ELECTION, "--file", "/dev/null", "--url", "redis://127.0.0.1:99999"});
    BOOST_TEST(bad_url.wait(10s) == 2);
}

BOOST_AUTO_TEST_SUITE_END()
