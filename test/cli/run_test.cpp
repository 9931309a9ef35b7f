// SPDX-License-Identifier: BSL-1.0
// The dlock tool run as a user runs it, against a redis-server the test starts.
#include "cli/cli_support.hpp"
#include "common/scratch_dir.hpp"

#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

using namespace std::chrono_literals;
using dlock::test::child;
using dlock::test::redis_server;
using namespace dlock::test::cli_tool;

namespace {

std::string temp_dir()
{
    return dlock::test::scratch_dir("dlock-cli");
}

std::string slurp(const std::string& path)
{
    std::ifstream in(path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// A command that says "held" once it runs and exits 3 on SIGTERM.
const std::string holder_script = R"(trap 'echo got-term; exit 3' TERM; echo held; while :; do sleep 0.05; done)";

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_run)

BOOST_AUTO_TEST_CASE(exit_status_and_environment_reach_the_caller)
{
    redis_server srv;
    auto r = dlock_cli({"run", "--url", srv.url(), "--lease", "7s", "job", "--", "/bin/sh", "-c",
                        "echo \"$DLOCK_NAME $DLOCK_FENCING_TOKEN $DLOCK_LEASE_MS\"; exit 7"});
    BOOST_TEST(r.status == 7);
    BOOST_TEST(r.out == "job 1 7000");
    auto s = status_json(srv, "job");
    BOOST_TEST(s["held"].as_bool() == false);  // released after the command
    BOOST_TEST(s["last_fencing_token"].as_int64() == 1);
    BOOST_TEST(dlock_cli({"run", "--url", srv.url(), "job", "--", "/bin/sh", "-c", "kill -9 $$"}).status == 128 + 9);
}

BOOST_AUTO_TEST_CASE(commands_on_one_name_never_overlap)
{
    redis_server srv;
    auto dir = temp_dir();
    // Each critical section is a non-atomic read-modify-write of a shared file, logging its
    // token; four shells run five sections each, all at once.
    std::string section = "c=$(cat " + dir +
                          "/counter 2>/dev/null || echo 0); echo \"begin $DLOCK_FENCING_TOKEN\" >> " + dir +
                          "/log; sleep 0.02; echo $((c+1)) > " + dir + "/counter; echo end >> " + dir + "/log";
    std::string loop = "for i in 1 2 3 4 5; do \"$0\" run --url " + srv.url() + " --lease 2s shared -- /bin/sh -c '" +
                       section + "' || exit 1; done";
    std::vector<std::unique_ptr<child>> shells;
    for (int i = 0; i < 4; ++i)
        shells.push_back(std::make_unique<child>(std::vector<std::string>{"/bin/sh", "-c", loop, DLOCK_CLI_PATH}));
    for (auto& s : shells)
        BOOST_TEST(s->wait(120s) == 0);
    BOOST_TEST(std::stoi(slurp(dir + "/counter")) == 20);
    std::istringstream log(slurp(dir + "/log"));
    std::string word;
    long last = 0;
    int sections = 0;
    bool inside = false;
    while (log >> word) {
        if (word == "begin") {
            BOOST_TEST_REQUIRE(!inside, "two commands overlapped");
            inside = true;
            long token = 0;
            log >> token;
            BOOST_TEST(token > last);  // fencing tokens strictly increase
            last = token;
            ++sections;
        } else {
            BOOST_TEST_REQUIRE(inside);
            inside = false;
        }
    }
    BOOST_TEST(sections == 20);
}

BOOST_AUTO_TEST_CASE(the_command_inherits_ignored_signals_and_no_sockets)
{
    redis_server srv;
    // nohup-style: SIGHUP ignored by the caller stays ignored for the command.
    auto r = dlock_cli({"run", "--url", srv.url(), "job", "--", "/bin/sh", "-c", "kill -HUP $$; echo survived"});
    BOOST_TEST(r.status == 129);  // the default: our test process does not ignore SIGHUP
    std::vector<std::string> argv{
        "/bin/sh", "-c", "trap '' HUP; exec \"$0\" run --url \"$1\" job -- /bin/sh -c 'kill -HUP $$; echo survived'",
        DLOCK_CLI_PATH, srv.url()};
    int st = 0;
    auto out = dlock::test::run_capture(argv, &st);
    BOOST_TEST(dlock::cli::exit_status_of(st) == 0);
    BOOST_TEST(out == "survived");
    // Only stdin, stdout and stderr reach the command: dlock's Redis sockets do not.
    // No pipeline in the shell: it would hold the pipe's fd while ls lists (a race).
    auto fds = dlock_cli({"run", "--url", srv.url(), "job", "--", "/bin/sh", "-c", "ls /proc/$$/fd"});
    BOOST_TEST(fds.status == 0);
    BOOST_TEST(fds.out == "0\n1\n2");
}

BOOST_AUTO_TEST_CASE(a_held_lock_gives_the_conflict_status)
{
    redis_server srv;
    auto holder = start_dlock({"run", "--url", srv.url(), "busy", "--", "/bin/sh", "-c", holder_script});
    BOOST_TEST_REQUIRE(next_line(*holder) == "held");
    auto once = dlock_cli({"run", "--url", srv.url(), "--wait", "0", "busy", "--", "/bin/echo", "ran"});
    BOOST_TEST(once.status == 75);
    BOOST_TEST(has(once.out, "'busy' is held elsewhere"));
    BOOST_TEST(!has(once.out, "ran"));
    BOOST_TEST(dlock_cli({"run", "--url", srv.url(), "--wait", "0", "--conflict-exit-code", "9", "busy", "--", "true"})
                   .status == 9);
    BOOST_TEST(dlock_cli({"run", "--url", srv.url(), "--wait", "200ms", "busy", "--", "true"}).status == 75);
    auto s = status_json(srv, "busy");
    BOOST_TEST(s["held"].as_bool());
    BOOST_TEST(s["fencing_token"].as_int64() == 1);
    BOOST_TEST(s["ttl_ms"].as_int64() > 0);
    holder->signal(SIGTERM);
    BOOST_TEST(next_line(*holder) == "got-term");  // forwarded
    BOOST_TEST(holder->wait() == 3);
    BOOST_TEST(status_json(srv, "busy")["held"].as_bool() == false);  // released after the command exited
}

BOOST_AUTO_TEST_CASE(readers_share_and_permits_count)
{
    redis_server srv;
    // Two commands hold the two permits; a third finds none free, and status shows them.
    auto p1 = start_dlock({"run", "--url", srv.url(), "--permits", "2", "pool", "--", "/bin/sh", "-c", holder_script});
    auto p2 = start_dlock({"run", "--url", srv.url(), "--permits", "2", "pool", "--", "/bin/sh", "-c", holder_script});
    BOOST_TEST_REQUIRE(next_line(*p1) == "held");
    BOOST_TEST_REQUIRE(next_line(*p2) == "held");
    BOOST_TEST(dlock_cli({"run", "--url", srv.url(), "--permits", "2", "--wait", "0", "pool", "--", "true"}).status ==
               75);
    auto other_n = dlock_cli({"run", "--url", srv.url(), "--permits", "3", "--wait", "0", "pool", "--", "true"});
    BOOST_TEST(other_n.status == 65);
    BOOST_TEST(has(other_n.out, "'pool' is held as a semaphore of 2 permits: use --permits 2"), other_n.out);
    auto s = status_json(srv, "pool");
    BOOST_TEST(s["kind"].as_string() == "semaphore");
    BOOST_TEST(s["holders"].as_int64() == 2);
    BOOST_TEST(s["permits"].as_int64() == 2);
    // A reader runs while another reads; a writer does not.
    auto r1 = start_dlock({"run", "--url", srv.url(), "--shared", "doc", "--", "/bin/sh", "-c", holder_script});
    BOOST_TEST_REQUIRE(next_line(*r1) == "held");
    auto r2 = dlock_cli({"run", "--url", srv.url(), "--shared", "--wait", "0", "doc", "--", "/bin/echo", "reading"});
    BOOST_TEST(r2.status == 0);
    BOOST_TEST(has(r2.out, "reading"));
    BOOST_TEST(dlock_cli({"run", "--url", srv.url(), "--exclusive", "--wait", "0", "doc", "--", "true"}).status == 75);
    BOOST_TEST(status_json(srv, "doc")["kind"].as_string() == "rw_lock");
    for (auto* c : {p1.get(), p2.get(), r1.get()}) {
        c->signal(SIGTERM);
        BOOST_TEST(next_line(*c) == "got-term");
        BOOST_TEST(c->wait() == 3);
    }
    BOOST_TEST(status_json(srv, "pool")["held"].as_bool() == false);
    BOOST_TEST(dlock_cli({"run", "--url", srv.url(), "--exclusive", "--wait", "0", "doc", "--", "true"}).status == 0);
}

// One name, one primitive, across processes: while readers hold NAME, the plain form (a
// mutex) must not run, waiting or not; it exits 65 and names the flags to use. And the
// other ways round.
BOOST_AUTO_TEST_CASE(a_name_held_as_another_primitive_is_refused_with_the_flags_to_use)
{
    redis_server srv;
    const std::string rw_advice = "'x' is held as a read-write lock: use --shared or --exclusive";
    auto reader = start_dlock({"run", "--url", srv.url(), "--shared", "x", "--", "/bin/sh", "-c", holder_script});
    BOOST_TEST_REQUIRE(next_line(*reader) == "held");
    auto plain = dlock_cli({"run", "--url", srv.url(), "--wait", "0", "x", "--", "/bin/echo", "ran"});
    BOOST_TEST(plain.status == 65, plain.out);
    BOOST_TEST(!has(plain.out, "ran"));
    BOOST_TEST(has(plain.out, rw_advice), plain.out);
    auto waiting = dlock_cli({"run", "--url", srv.url(), "x", "--", "/bin/echo", "ran"});  // refused, not waiting
    BOOST_TEST(waiting.status == 65, waiting.out);
    BOOST_TEST(has(waiting.out, rw_advice), waiting.out);
    auto permits = dlock_cli({"run", "--url", srv.url(), "--permits", "2", "--wait", "0", "x", "--", "true"});
    BOOST_TEST(permits.status == 65, permits.out);
    BOOST_TEST(has(permits.out, rw_advice), permits.out);
    // Redis without scripting takes only mutexes, and refuses this name all the same.
    auto noscript = dlock_cli({"run", "--url", srv.url(), "--no-scripting", "--wait", "0", "x", "--", "true"});
    BOOST_TEST(noscript.status == 65, noscript.out);
    BOOST_TEST(has(noscript.out, "in use as a read-write lock"), noscript.out);
    BOOST_TEST(dlock_cli({"run", "--url", srv.url(), "--shared", "--wait", "0", "x", "--", "true"}).status == 0);
    reader->signal(SIGTERM);
    BOOST_TEST(next_line(*reader) == "got-term");
    BOOST_TEST(reader->wait() == 3);

    // Held as a mutex: neither side of a read-write lock nor a permit.
    auto holder = start_dlock({"run", "--url", srv.url(), "x", "--", "/bin/sh", "-c", holder_script});
    BOOST_TEST_REQUIRE(next_line(*holder) == "held");
    for (auto flags : {std::vector<std::string>{"--shared"}, {"--exclusive"}, {"--permits", "3"}}) {
        std::vector<std::string> args{"run", "--url", srv.url(), "--wait", "0"};
        args.insert(args.end(), flags.begin(), flags.end());
        args.insert(args.end(), {"x", "--", "true"});
        auto r = dlock_cli(args);
        BOOST_TEST(r.status == 65, flags[0] << ": " << r.out);
        BOOST_TEST(has(r.out, "'x' is held as a mutex: use neither --shared, --exclusive nor --permits"), r.out);
    }
    holder->signal(SIGTERM);
    BOOST_TEST(next_line(*holder) == "got-term");
    BOOST_TEST(holder->wait() == 3);

    // Held as a semaphore: the plain form is told its N.
    auto permit = start_dlock({"run", "--url", srv.url(), "--permits", "2", "x", "--", "/bin/sh", "-c", holder_script});
    BOOST_TEST_REQUIRE(next_line(*permit) == "held");
    auto as_mutex = dlock_cli({"run", "--url", srv.url(), "--wait", "0", "x", "--", "true"});
    BOOST_TEST(as_mutex.status == 65, as_mutex.out);
    BOOST_TEST(has(as_mutex.out, "'x' is held as a semaphore of 2 permits: use --permits 2"), as_mutex.out);
    permit->signal(SIGTERM);
    BOOST_TEST(next_line(*permit) == "got-term");
    BOOST_TEST(permit->wait() == 3);

    // All gone: the plain form runs, and no key of the name is left.
    auto free = dlock_cli({"run", "--url", srv.url(), "--wait", "0", "x", "--", "/bin/echo", "ran"});
    BOOST_TEST(free.status == 0, free.out);
    BOOST_TEST(has(free.out, "ran"));
    BOOST_TEST(srv.keys("*:x").empty());
}

BOOST_AUTO_TEST_CASE(a_lease_lost_mid_command_stops_it)
{
    redis_server srv;
    auto holder =
        start_dlock({"run", "--url", srv.url(), "--lease", "900ms", "job", "--", "/bin/sh", "-c", holder_script});
    BOOST_TEST_REQUIRE(next_line(*holder) == "held");
    auto r = dlock_cli({"release", "--url", srv.url(), "--force", "job"});
    BOOST_TEST(r.status == 0);
    BOOST_TEST(has(r.out, "released"));
    BOOST_TEST(next_line(*holder) == "got-term");  // at the next renewal
    BOOST_TEST(holder->wait() == 76);
    BOOST_TEST(has(dlock_cli({"release", "--url", srv.url(), "--force", "job"}).out, "was not held"));
}

BOOST_AUTO_TEST_CASE(release_force_frees_one_side_of_a_read_write_lock)
{
    redis_server srv;
    auto reader = start_dlock(
        {"run", "--url", srv.url(), "--lease", "900ms", "--shared", "doc", "--", "/bin/sh", "-c", holder_script});
    BOOST_TEST_REQUIRE(next_line(*reader) == "held");
    auto w = dlock_cli({"release", "--url", srv.url(), "--force", "--exclusive", "doc"});
    BOOST_TEST(w.status == 0, w.out);
    BOOST_TEST(has(w.out, "no writer held it"), w.out);
    auto r = dlock_cli({"release", "--url", srv.url(), "--force", "--shared", "doc"});
    BOOST_TEST(r.status == 0, r.out);
    BOOST_TEST(has(r.out, "readers released"), r.out);
    BOOST_TEST(next_line(*reader) == "got-term");  // at its next renewal
    BOOST_TEST(reader->wait() == 76);
    BOOST_TEST(srv.keys("*:doc").empty());

    // A mutex's name has no sides: the tool says what it is and frees nothing.
    auto holder = start_dlock({"run", "--url", srv.url(), "job", "--", "/bin/sh", "-c", holder_script});
    BOOST_TEST_REQUIRE(next_line(*holder) == "held");
    auto m = dlock_cli({"release", "--url", srv.url(), "--force", "--shared", "job"});
    BOOST_TEST(m.status == 65, m.out);
    BOOST_TEST(has(m.out, "'job' is in use as a mutex"), m.out);
    holder->signal(SIGTERM);
    BOOST_TEST(next_line(*holder) == "got-term");
    BOOST_TEST(holder->wait() == 3);  // its own exit: the lock was never lost
}

BOOST_AUTO_TEST_CASE(a_fixed_lease_ends_the_command_at_its_end)
{
    redis_server srv;
    auto r = dlock_cli({"run", "--url", srv.url(), "--lease", "300ms", "--no-watchdog", "--grace", "100ms", "job", "--",
                        "/bin/sh", "-c", "trap '' TERM; echo held; while :; do sleep 0.05; done"});
    BOOST_TEST(r.status == 76);  // SIGTERM ignored, so SIGKILL after the grace period
    BOOST_TEST(has(r.out, "held"));
    BOOST_TEST(has(r.out, "SIGKILL"));
}

BOOST_AUTO_TEST_CASE(a_killed_dlock_takes_its_command_down_and_the_lock_frees_itself)
{
    redis_server srv;
    auto dir = temp_dir();
    auto holder =
        start_dlock({"run", "--url", srv.url(), "--lease", "1s", "job", "--", "/bin/sh", "-c",
                     "trap 'echo term > " + dir + "/term; exit 0' TERM; echo held; while :; do sleep 0.05; done"});
    BOOST_TEST_REQUIRE(next_line(*holder) == "held");
    holder->signal(SIGKILL);
    BOOST_TEST(holder->wait() == 128 + SIGKILL);
    auto r = dlock_cli({"run", "--url", srv.url(), "--wait", "10s", "job", "--", "/bin/cat", dir + "/term"});
    BOOST_TEST(r.status == 0, r.out);
    BOOST_TEST(r.out == "term");  // the orphaned command got SIGTERM (and had exited before)
}

BOOST_AUTO_TEST_CASE(a_signal_while_waiting_leaves_nothing_behind)
{
    redis_server srv;
    auto holder = start_dlock({"run", "--url", srv.url(), "job", "--", "/bin/sh", "-c", holder_script});
    BOOST_TEST_REQUIRE(next_line(*holder) == "held");
    auto waiter = start_dlock({"run", "--url", srv.url(), "--verbose", "job", "--", "/bin/echo", "ran"});
    // The waiter is waiting once it has subscribed to its grant channel (before it queues
    // at the server); nothing else shows it, so ask the server.
    auto deadline = std::chrono::steady_clock::now() + 10s;
    std::string channels;
    while (channels.empty() && std::chrono::steady_clock::now() < deadline)
        channels = srv.cli({"PUBSUB", "CHANNELS", "*granted*"});
    BOOST_TEST_REQUIRE(!channels.empty());
    // And queued at the server, so the signal has a queue entry to take back.
    while (status_json(srv, "job")["queued"].as_int64() != 1 && std::chrono::steady_clock::now() < deadline) {
    }
    BOOST_TEST_REQUIRE(status_json(srv, "job")["queued"].as_int64() == 1);
    waiter->signal(SIGINT);
    BOOST_TEST(waiter->wait() == 128 + SIGINT);
    auto s = status_json(srv, "job");
    BOOST_TEST(s["held"].as_bool());
    BOOST_TEST(s["fencing_token"].as_int64() == 1);                    // the holder's lease, untouched
    BOOST_TEST(srv.cli({"PUBSUB", "CHANNELS", "*granted*"}).empty());  // the waiter unsubscribed (it exited)
    BOOST_TEST(srv.cli({"EVAL", "return #redis.call('KEYS', '*queue*')", "0"}) == "0");  // and left the queue
    holder->signal(SIGTERM);
    BOOST_TEST(holder->wait() == 3);
}

BOOST_AUTO_TEST_CASE(a_server_lost_while_waiting_is_not_a_conflict)
{
    redis_server srv;
    // Short request timeouts: the holder's release after the server died gives up quickly.
    auto holder = start_dlock(
        {"run", "--url", srv.url() + "?request_timeout=300ms", "job", "--", "/bin/sh", "-c", holder_script});
    BOOST_TEST_REQUIRE(next_line(*holder) == "held");
    auto waiter = start_dlock({"run", "--url", srv.url(), "--wait", "2s", "job", "--", "/bin/echo", "ran"});
    auto deadline = std::chrono::steady_clock::now() + 10s;  // waiting once subscribed
    while (srv.cli({"PUBSUB", "CHANNELS", "*granted*"}).empty() && std::chrono::steady_clock::now() < deadline) {
    }
    srv.kill();
    BOOST_TEST(waiter->wait() == 69);
    holder->signal(SIGTERM);
    BOOST_TEST(holder->wait() == 3);  // the command ran to its end; its lease was suspect, not yet lost
}

BOOST_AUTO_TEST_CASE(bad_input_gets_one_line_and_a_documented_status)
{
    dlock::test::server_options opts;
    opts.password = "secret";
    redis_server srv(opts);
    auto r = dlock_cli({"run", "--bogus", "job", "--", "true"});
    BOOST_TEST(r.status == 2);
    BOOST_TEST(r.out == "dlock: run: unknown option '--bogus' (try dlock run --help)");
    r = dlock_cli({"run", "--lease", "ten", "job", "--", "true"});
    BOOST_TEST(r.status == 2);
    BOOST_TEST(has(r.out, "--lease 'ten'"));
    r = dlock_cli({"release", "job"});
    BOOST_TEST(r.status == 2);
    BOOST_TEST(has(r.out, "--force"));
    r = dlock_cli(
        {"run", "--url", "redis://127.0.0.1:" + std::to_string(dlock::test::free_port()), "job", "--", "true"});
    BOOST_TEST(r.status == 69);
    BOOST_TEST(has(r.out, "cannot use the server"));
    BOOST_TEST(std::count(r.out.begin(), r.out.end(), '\n') == 0);
    r = dlock_cli({"status", "--url", "redis://:wrong@127.0.0.1:" + std::to_string(srv.port()), "job"});
    BOOST_TEST(r.status == 69);
    BOOST_TEST(has(r.out, "cannot use the server"));
    BOOST_TEST(!has(r.out, "wrong"));  // the password never appears in messages
    r = dlock_cli(
        {"run", "--url", "redis://:secret@127.0.0.1:" + std::to_string(srv.port()), "job", "--", "/no/such/command"});
    BOOST_TEST(r.status == 127);
    BOOST_TEST(has(r.out, "cannot run '/no/such/command'"));
    r = dlock_cli({"run", "--url", "redis://:secret@127.0.0.1:" + std::to_string(srv.port()), "job", "--", "/"});
    BOOST_TEST(r.status == 126);
    r = dlock_cli({"run", "--help"});
    BOOST_TEST(r.status == 0);
    BOOST_TEST(has(r.out, "usage: dlock run"));
}

BOOST_AUTO_TEST_CASE(config_file_and_environment)
{
    redis_server srv;
    auto dir = temp_dir();
    {
        std::ofstream f(dir + "/dlock.json");
        f << R"({"url": ")" << srv.url() << R"(", "prefix": "team", "lease": "5s"})";
    }
    auto r = dlock_cli({"run", "--config", dir + "/dlock.json", "job", "--", "/bin/sh", "-c", "echo $DLOCK_LEASE_MS"});
    BOOST_TEST(r.status == 0, r.out);
    BOOST_TEST(r.out == "5000");
    auto holder = start_dlock({"run", "--config", dir + "/dlock.json", "job", "--", "/bin/sh", "-c", holder_script});
    BOOST_TEST_REQUIRE(next_line(*holder) == "held");
    auto s = dlock_cli({"status", "--config", dir + "/dlock.json", "--json", "job"});
    BOOST_TEST(has(s.out, "\"prefix\":\"team\""));
    BOOST_TEST(has(s.out, "\"held\":true"));
    BOOST_TEST(has(s.out, "team:job"));
    // The flag wins over the file: another prefix is another lock.
    auto other = dlock_cli({"status", "--config", dir + "/dlock.json", "--prefix", "other", "--json", "job"});
    BOOST_TEST(has(other.out, "\"held\":false"));
    holder->signal(SIGTERM);
    BOOST_TEST(holder->wait() == 3);
    ::setenv("DLOCK_URL", srv.url().c_str(), 1);
    auto e = dlock_cli({"status", "job"});
    ::unsetenv("DLOCK_URL");
    BOOST_TEST(e.status == 0, e.out);
    BOOST_TEST(has(e.out, "job: free"));
}

BOOST_AUTO_TEST_SUITE_END()
