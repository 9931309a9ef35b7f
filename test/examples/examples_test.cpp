// SPDX-License-Identifier: BSL-1.0
// The examples as a user runs them: real processes against a redis-server each test starts.
// Every wait is on a child's output or exit, bounded; nothing sleeps to synchronise.
#include <dlock/dlock.hpp>

#include "common/child.hpp"
#include "common/redis_server.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
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
    while (auto line = c.read_line(
               std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now())))
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

// A fresh directory, removed with everything in it at the end of the test.
class temp_dir {
public:
    temp_dir()
    {
        char dir[] = "/tmp/dlock-examples-XXXXXX";
        BOOST_TEST_REQUIRE(::mkdtemp(dir) != nullptr);
        path_ = dir;
    }
    ~temp_dir()
    {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }
    temp_dir(const temp_dir&) = delete;
    temp_dir& operator=(const temp_dir&) = delete;
    std::string file(const std::string& name) const { return path_ + "/" + name; }

private:
    std::string path_;
};

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
    BOOST_TEST(out.find("A release: " + dlock::make_error_code(dlock::error::lock_lost).message()) !=
               std::string::npos);
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
    std::vector<std::string> argv{DLOCK_EXAMPLE_LEADER_ELECTION,
                                  "--url",
                                  srv.url(),
                                  "--id",
                                  id,
                                  "--file",
                                  file,
                                  "--lease",
                                  "1s",
                                  "--period",
                                  "100ms",
                                  "--duration",
                                  "60s"};
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

std::uint64_t token_of(const fleet::event& e)
{
    return std::stoull(words(e.line).at(2));
}

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
    temp_dir dir;
    const std::string file = dir.file("leader.log");
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
    temp_dir dir;
    const std::string file = dir.file("leader.log");
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

BOOST_AUTO_TEST_SUITE(http_endpoint)

namespace {

namespace asio = boost::asio;

// A tiny blocking HTTP/1.1 client: one connection, requests one at a time, 20 s per read.
class http_client {
public:
    struct reply {
        int status = 0;
        std::string body;
    };

    explicit http_client(std::uint16_t port)
    {
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(port);
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
            throw std::runtime_error("connect to 127.0.0.1:" + std::to_string(port) + " failed");
        timeval limit{20, 0};
        ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    }
    ~http_client() { close(); }
    http_client(const http_client&) = delete;
    http_client& operator=(const http_client&) = delete;

    void close()
    {
        if (fd_ >= 0)
            ::close(fd_);
        fd_ = -1;
    }

    bool send(std::string_view method, std::string_view path)
    {
        std::string req =
            std::string(method) + " " + std::string(path) + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n";
        return ::send(fd_, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size());
    }

    // nullopt: the connection ended (or 20 s passed) before a whole reply came.
    std::optional<reply> receive()
    {
        for (;;) {
            auto head_end = buf_.find("\r\n\r\n");
            if (head_end != std::string::npos && buf_.size() >= 12) {
                std::string head = buf_.substr(0, head_end);
                for (auto& ch : head)
                    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
                std::size_t length = 0;
                if (auto at = head.find("\r\ncontent-length:"); at != std::string::npos)
                    length = std::stoul(head.substr(at + 17));
                if (buf_.size() >= head_end + 4 + length) {
                    reply r{std::stoi(buf_.substr(9, 3)), buf_.substr(head_end + 4, length)};
                    buf_.erase(0, head_end + 4 + length);
                    return r;
                }
            }
            char tmp[4096];
            ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
            if (n <= 0)
                return std::nullopt;
            buf_.append(tmp, static_cast<std::size_t>(n));
        }
    }

    std::optional<reply> request(std::string_view method, std::string_view path)
    {
        if (!send(method, path))
            return std::nullopt;
        return receive();
    }

private:
    int fd_ = -1;
    std::string buf_;
};

std::vector<std::string> endpoint(const redis_server& srv, const std::string& lock_timeout)
{
    return {DLOCK_EXAMPLE_HTTP_ENDPOINT,
            "--url",
            srv.url(),
            "--port",
            "0",
            "--lock-timeout",
            lock_timeout,
            "--duration",
            "120s"};
}

std::uint16_t listening_port(child& c)
{
    auto line = c.read_line(20s);
    BOOST_TEST_REQUIRE(starts_with(line, "listening on "), line.value_or("<no output>"));
    return static_cast<std::uint16_t>(std::stoul(line->substr(13)));
}

// Holds one lock for the test, as another process would; the io_context runs only while
// acquiring or releasing (a 30 s lease needs no renewal within a test).
class holder {
public:
    explicit holder(const redis_server& srv) : store_(io_.get_executor(), srv.config()), locks_(store_) {}
    ~holder() { store_.close(); }

    void acquire(const std::string& name)
    {
        run([&]() -> asio::awaitable<void> { guard_ = co_await locks_.obtain(name).acquire_for(5s); });
        BOOST_TEST_REQUIRE(guard_.owns_lock());
    }
    void release()
    {
        run([&]() -> asio::awaitable<void> { co_await guard_.release(); });
    }

private:
    template <class F>
    void run(F f)
    {
        bool done = false;
        std::exception_ptr failure;
        io_.restart();
        asio::co_spawn(io_, f(), [&](std::exception_ptr e) {
            done = true;
            failure = e;
            io_.stop();
        });
        io_.run_for(10s);
        BOOST_TEST_REQUIRE(done);
        if (failure)
            std::rethrow_exception(failure);
    }

    asio::io_context io_;
    dlock::redis_store store_;
    dlock::registry locks_;
    dlock::guard guard_;
};

// Waits until some process waits for `name` (its waiter subscribes to the release
// channel): asks the server, a bounded number of times.
bool someone_waits_for(const redis_server& srv, const std::string& name, bool expected = true)
{
    for (int i = 0; i < 2000; ++i) {
        bool waiting = !srv.cli({"PUBSUB", "CHANNELS", "*" + name + ":*"}).empty();  // its grant channel
        if (waiting == expected)
            return true;
    }
    return false;
}

}  // namespace

BOOST_AUTO_TEST_CASE(concurrent_posts_on_one_id_count_exactly)
{
    redis_server srv;
    // Two servers on one Redis: the lock has to work across processes, not just inside one.
    child server_a(endpoint(srv, "10s")), server_b(endpoint(srv, "10s"));
    const std::uint16_t ports[] = {listening_port(server_a), listening_port(server_b)};

    constexpr int clients = 8, posts = 25;
    std::mutex mutex;
    std::vector<long> values;
    std::vector<std::string> failures;
    std::vector<std::thread> threads;
    for (int c = 0; c < clients; ++c) {
        threads.emplace_back([&, c] {
            try {
                http_client client(ports[c % 2]);
                for (int i = 0; i < posts; ++i) {
                    auto r = client.request("POST", "/counter/hot");
                    std::lock_guard lock(mutex);
                    if (!r || r->status != 200)
                        failures.push_back(r ? std::to_string(r->status) + " " + r->body : "no reply");
                    else
                        values.push_back(std::stol(r->body));
                }
            } catch (const std::exception& e) {
                std::lock_guard lock(mutex);
                failures.push_back(e.what());
            }
        });
    }
    for (auto& t : threads)
        t.join();
    BOOST_TEST(failures.empty(), failures.size() << " failed, first: " << (failures.empty() ? "" : failures[0]));
    // Every increment saw the one before it: the answers are exactly 1..N.
    std::sort(values.begin(), values.end());
    std::vector<long> expected(clients * posts);
    std::iota(expected.begin(), expected.end(), 1);
    BOOST_TEST(values == expected, boost::test_tools::per_element());
    http_client reader(ports[0]);
    auto total = reader.request("GET", "/counter/hot");
    BOOST_REQUIRE(total);
    BOOST_TEST(total->body == std::to_string(clients * posts) + "\n");

    server_a.signal(SIGTERM);
    server_b.signal(SIGTERM);
    BOOST_TEST(server_a.wait(10s) == 0);
    BOOST_TEST(server_b.wait(10s) == 0);
}

BOOST_AUTO_TEST_CASE(busy_resource_503_and_a_client_that_leaves_stops_waiting)
{
    redis_server srv;
    child quick(endpoint(srv, "300ms")), patient(endpoint(srv, "10s"));
    const auto quick_port = listening_port(quick), patient_port = listening_port(patient);
    holder other(srv);
    other.acquire("counter:busy");

    // The lock stays taken: 503 once the lock timeout has passed, not before.
    http_client c1(quick_port);
    auto start = std::chrono::steady_clock::now();
    auto r = c1.request("POST", "/counter/busy");
    auto waited = ms_since(start);
    BOOST_REQUIRE(r);
    BOOST_TEST(r->status == 503);
    BOOST_TEST(waited >= 300, "answered after " << waited << " ms");
    BOOST_TEST(waited < 5000, "answered after " << waited << " ms");
    auto line = quick.read_line(5s);
    BOOST_TEST(starts_with(line, "busy counter:busy"), line.value_or("<none>"));
    // The timed-out waiter left nothing behind.
    BOOST_TEST(someone_waits_for(srv, "counter:busy", false));

    // A client that leaves while its request waits: the handler stops waiting at once.
    http_client c2(patient_port);
    BOOST_REQUIRE(c2.send("POST", "/counter/busy"));
    BOOST_REQUIRE(someone_waits_for(srv, "counter:busy"));
    start = std::chrono::steady_clock::now();
    c2.close();
    line = patient.read_line(5s);
    BOOST_TEST(starts_with(line, "gone counter:busy: the client left"), line.value_or("<none>"));
    BOOST_TEST(ms_since(start) < 2000);

    // Neither request incremented anything: the next one is the first.
    other.release();
    http_client c3(patient_port);
    r = c3.request("POST", "/counter/busy");
    BOOST_REQUIRE(r);
    BOOST_TEST(r->status == 200);
    BOOST_TEST(r->body == "1\n");

    quick.signal(SIGTERM);
    patient.signal(SIGTERM);
    BOOST_TEST(quick.wait(10s) == 0);
    BOOST_TEST(patient.wait(10s) == 0);
}

BOOST_AUTO_TEST_CASE(shutdown_cancels_waiting_handlers)
{
    redis_server srv;
    child server(endpoint(srv, "60s"));
    const auto port = listening_port(server);
    holder other(srv);
    other.acquire("counter:held");
    http_client c(port);
    BOOST_REQUIRE(c.send("POST", "/counter/held"));
    BOOST_REQUIRE(someone_waits_for(srv, "counter:held"));

    // SIGTERM: the waiting handler stops (no reply, connection closed) and the server exits
    // long before the 60 s lock timeout.
    auto start = std::chrono::steady_clock::now();
    server.signal(SIGTERM);
    auto line = server.read_line(10s);
    BOOST_TEST(starts_with(line, "gone counter:held: shutting down"), line.value_or("<none>"));
    BOOST_TEST(server.wait(10s) == 0);
    BOOST_TEST(ms_since(start) < 5000);
    BOOST_TEST(!c.receive().has_value());
    BOOST_TEST(someone_waits_for(srv, "counter:held", false));
    other.release();
    BOOST_TEST(srv.cli({"GET", "counter:held"}).empty());
}

BOOST_AUTO_TEST_CASE(bad_flags_exit_2_and_unreachable_redis_exit_1)
{
    child bad_port({DLOCK_EXAMPLE_HTTP_ENDPOINT, "--port", "http"});
    BOOST_TEST(bad_port.wait(10s) == 2);
    child bad_url({DLOCK_EXAMPLE_HTTP_ENDPOINT, "--url", "redis://"});
    BOOST_TEST(bad_url.wait(10s) == 2);
    child no_redis({DLOCK_EXAMPLE_HTTP_ENDPOINT, "--url",
                    "redis://127.0.0.1:" + std::to_string(dlock::test::free_port()), "--port", "0"});
    BOOST_TEST(no_redis.wait(10s) == 1);
}

BOOST_AUTO_TEST_SUITE_END()
