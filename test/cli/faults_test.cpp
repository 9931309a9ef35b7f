// SPDX-License-Identifier: BSL-1.0
// The dlock tool against a server that misbehaves: a fault proxy (test/common/tcp_proxy)
// sits between them, holding replies back or answering everything with +OK.
#include "cli/cli_support.hpp"
#include "common/tcp_proxy.hpp"

#include <boost/test/unit_test.hpp>

#include <signal.h>

#include <chrono>
#include <thread>

using namespace std::chrono_literals;
using dlock::test::redis_server;
using dlock::test::tcp_proxy;
using namespace dlock::test::cli_tool;

namespace {

// Reads the child's merged output to its end, then its exit status.
outcome finish(dlock::test::child& c)
{
    outcome r;
    while (auto line = c.read_line())
        r.out += *line + "\n";
    r.status = c.wait();
    return r;
}

std::string lock_count(const redis_server& srv)
{
    return srv.cli({"EVAL", "return #redis.call('KEYS', '*:lock:*')", "0"});
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_faults)

// Issue "a cancelled acquire keeps the lock": the attempt has reached Redis (and will take
// the lock there) but its reply is late when SIGTERM comes. dlock must give that lease back.
BOOST_AUTO_TEST_CASE(a_signal_while_the_attempt_is_in_flight_leaves_no_lease)
{
    redis_server srv;
    tcp_proxy proxy(srv.port());
    proxy.delay_replies(1500ms);
    // Every handshake reply is late too: give the connection time to come up.
    auto d = start_dlock_merged({"run", "--url", proxy.url() + "?connect_timeout=20s", "x", "--", "/bin/echo", "ran"});
    // The first EVAL is the connect's check that scripts may run; the second is the acquire.
    BOOST_TEST_REQUIRE(proxy.wait_for_evals(2, 30s), "the acquire's EVAL never reached the server");
    // Redis has run it (its reply waits in the proxy), or will within moments: the lock is
    // taken. Then SIGTERM, well before that reply is due at dlock.
    auto deadline = std::chrono::steady_clock::now() + 1s;
    while (lock_count(srv) != "1" && std::chrono::steady_clock::now() < deadline) {
    }
    BOOST_TEST_REQUIRE(lock_count(srv) == "1", "the attempt did not take the lock at the server");
    d->signal(SIGTERM);
    auto r = finish(*d);
    BOOST_TEST(r.status == 128 + SIGTERM, r.out);
    BOOST_TEST(has(r.out, "interrupted by signal 15 before running the command"), r.out);
    BOOST_TEST(!has(r.out, "ran"));
    BOOST_TEST(lock_count(srv) == "0");
    auto s = status_json(srv, "x");
    BOOST_TEST(s["held"].as_bool() == false, boost::json::serialize(s));
    auto next = dlock_cli({"run", "--url", srv.url(), "--wait", "0", "x", "--", "/bin/echo", "next"});
    BOOST_TEST(next.status == 0, next.out);
    BOOST_TEST(next.out == "next");
}

// Issue "a server that answers but never grants": +OK to every command is no lock and no
// conflict either. dlock must stop soon and say why, with or without --wait.
BOOST_AUTO_TEST_CASE(a_server_that_answers_ok_to_everything_is_not_a_conflict)
{
    redis_server srv;
    tcp_proxy proxy(srv.port());
    proxy.answer_ok_to_everything();
    for (std::vector<std::string> wait : {std::vector<std::string>{}, {"--wait", "5s"}}) {
        std::vector<std::string> args{"run", "--url", proxy.url()};
        args.insert(args.end(), wait.begin(), wait.end());
        args.insert(args.end(), {"x", "--", "/bin/echo", "ran"});
        auto start = std::chrono::steady_clock::now();
        auto r = dlock_cli(args);
        auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
        BOOST_TEST_MESSAGE("exit " << r.status << " after " << took.count() << " ms: " << r.out);
        BOOST_TEST(r.status != 128 + SIGKILL, "dlock hung until timeout(1) killed it");
        BOOST_TEST(r.status != 0, r.out);
        BOOST_TEST(r.status != 75, r.out);
        BOOST_TEST(!has(r.out, "held elsewhere"), r.out);
        BOOST_TEST(!has(r.out, "ran"), r.out);
        BOOST_TEST(has(r.out, "cannot"), r.out);
    }
}

// Issue 29, item 5: the command ends well inside its lease, having shut Redis (AOF) down;
// Redis is back only after the lease's end, and the release, queued meanwhile, then finds
// the lease expired. The loss is judged by what was true when the command ended: none.
BOOST_AUTO_TEST_CASE(a_release_delayed_past_the_lease_end_is_no_loss)
{
    dlock::test::server_options opts;
    opts.appendonly = true;
    redis_server srv(opts);
    const std::string port = std::to_string(srv.port());
    auto d = start_dlock_merged({"run", "--url", srv.url(), "--lease", "1s", "f2", "--", "/bin/sh", "-c",
                                 "redis-cli -p " + port + " shutdown; echo shut-down"});
    std::string out;
    for (std::string line; (line = next_line(*d)) != "<eof>";) {
        out += line + "\n";
        if (line == "shut-down")
            break;
    }
    BOOST_TEST_REQUIRE(has(out, "shut-down"), out);
    srv.stop();  // reaps the server the command shut down
    // The scenario's own time, not a synchronisation: Redis stays away past the 1 s lease.
    std::this_thread::sleep_for(1500ms);
    srv.start();
    auto r = finish(*d);
    r.out = out + r.out;
    BOOST_TEST(r.status == 0, r.out);
    BOOST_TEST(!has(r.out, "lost"), r.out);
}

BOOST_AUTO_TEST_SUITE_END()
