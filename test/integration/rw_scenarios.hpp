// SPDX-License-Identifier: BSL-1.0
// The read-write lock's scenarios with real processes, written once for every store that has
// the primitive: lock_worker "sections" processes (a URL, or a Redis port) log when each
// section began and ended, and the log is replayed (sections_log.hpp). Each store's test file
// calls them and adds what only it can check (keys left on Redis, Curator's nodes on ZooKeeper).
#pragma once

#include <dlock/dlock.hpp>

#include "common/child.hpp"
#include "common/redis_server.hpp"  // run_capture
#include "integration/lock_test_util.hpp"
#include "integration/mutual_exclusion.hpp"
#include "integration/sections_log.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

namespace dlock::test::rw {

using namespace std::chrono_literals;

/// A lock_worker running `n` sections of `hold_ms` in each of `coroutines` coroutines, on
/// `what` (read, write, permits=N) of `name` at `where` (a URL or a Redis port).
inline std::unique_ptr<child> sections(const std::string& where, const std::string& name, const std::string& what,
                                       int coroutines, int n, int hold_ms, const std::string& log)
{
    return std::make_unique<child>(std::vector<std::string>{worker_path(), "sections", where, name, what,
                                                            std::to_string(coroutines), std::to_string(n),
                                                            std::to_string(hold_ms), log});
}

inline std::size_t lines_of(const std::string& path)
{
    std::ifstream in(path);
    return static_cast<std::size_t>(std::count(std::istreambuf_iterator<char>(in), {}, '\n'));
}

/// Two reader and two writer processes on one name: every section ran, a writer never
/// overlapped anyone and its fencing tokens rose, readers overlapped. Returns the log's
/// replay for the store's own checks.
inline sections_log readers_share_writers_exclude(const std::string& where, const std::string& log)
{
    std::vector<std::unique_ptr<child>> ws;
    ws.push_back(sections(where, "rw", "read", 4, 15, 10, log));
    ws.push_back(sections(where, "rw", "read", 4, 15, 10, log));
    ws.push_back(sections(where, "rw", "write", 2, 10, 3, log));
    ws.push_back(sections(where, "rw", "write", 2, 10, 3, log));
    for (auto& w : ws)
        expect_done(*w);
    auto r = read_sections_log(log);
    BOOST_TEST(r.begins == 2u * 4 * 15 + 2u * 2 * 10);
    BOOST_TEST(r.ends == r.begins);
    BOOST_TEST(r.well_formed);
    BOOST_TEST(r.writer_alone);        // a writer never overlaps anyone
    BOOST_TEST(r.writer_tokens_rise);  // and its tokens rise
    // Readers do overlap (several in one process at least; whether the two processes' readers
    // meet depends on where the writers queue).
    BOOST_TEST(r.max_readers > 1u, "max readers inside at once: " << r.max_readers);
    BOOST_TEST_MESSAGE("max reader processes inside at once: " << r.max_reader_pids);
    return r;
}

/// A stream of readers that never lets go by itself (16 coroutines, 200 sections of 5 ms back
/// to back): a writer that comes later still gets in, and readers go on after it.
inline void a_writer_gets_in_while_readers_keep_arriving(const std::string& where, const std::string& log)
{
    auto readers = sections(where, "stream", "read", 16, 200, 5, log);
    boost::asio::io_context io;
    bool streaming = false;
    spawn(io, [&]() -> boost::asio::awaitable<void> {
        streaming = co_await eventually([&] { return lines_of(log) >= 64; }, 20s);
    });
    io.run();
    BOOST_REQUIRE(streaming);
    auto writer = sections(where, "stream", "write", 1, 1, 5, log);
    expect_done(*writer);
    expect_done(*readers);
    auto r = read_sections_log(log);
    BOOST_TEST(r.writer_alone);
    BOOST_TEST(r.well_formed);
    BOOST_TEST(r.max_readers > 1u);
    // The writer did not wait for the stream to end: readers began after it.
    BOOST_TEST(r.last_writer_line > 0u);
    BOOST_TEST(r.reader_begins_after_last_writer > 100u,
               "readers that began after the writer: " << r.reader_begins_after_last_writer);
}

/// Runs the dlock tool at `cli` to its end (killed after 60 s): its exit code, and what it
/// printed (stderr too) into `out`.
inline int run_tool(const std::string& cli, std::vector<std::string> args, std::string* out = nullptr)
{
    std::vector<std::string> argv{"/bin/sh", "-c", "exec timeout -s KILL 60 \"$0\" \"$@\" 2>&1", cli};
    argv.insert(argv.end(), args.begin(), args.end());
    int status = -1;
    auto text = run_capture(argv, &status);
    if (out)
        *out = text;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// A command of the tool that says "held", then waits for SIGTERM (it exits 3 on it).
inline const std::string tool_holder = "trap 'echo got-term; exit 3' TERM; echo held; while :; do sleep 0.05; done";

/// The tool at `url`: two `dlock run --permits 2` hold both permits, a third finds none
/// (75), one with another number is told which to use (65); status names the semaphore;
/// once a holder is stopped, the next one runs.
inline void the_tool_counts_permits(const std::string& cli, const std::string& url)
{
    auto tool = [&](std::vector<std::string> args, std::string* out = nullptr) { return run_tool(cli, args, out); };
    child p1({cli, "run", "--url", url, "--permits", "2", "pool", "--", "/bin/sh", "-c", tool_holder});
    child p2({cli, "run", "--url", url, "--permits", "2", "pool", "--", "/bin/sh", "-c", tool_holder});
    BOOST_TEST_REQUIRE(p1.read_line(60s).value_or("<eof>") == "held");
    BOOST_TEST_REQUIRE(p2.read_line(60s).value_or("<eof>") == "held");
    std::string out;
    BOOST_TEST(tool({"run", "--url", url, "--permits", "2", "--wait", "0", "pool", "--", "true"}, &out) == 75, out);
    BOOST_TEST(tool({"run", "--url", url, "--permits", "3", "--wait", "0", "pool", "--", "true"}, &out) == 65, out);
    BOOST_TEST(out.find("'pool' is held as a semaphore of 2 permits: use --permits 2") != std::string::npos, out);
    BOOST_TEST(tool({"status", "--url", url, "--json", "pool"}, &out) == 0, out);
    BOOST_TEST(out.find("\"kind\":\"semaphore\"") != std::string::npos, out);
    BOOST_TEST(out.find("\"holders\":2") != std::string::npos, out);
    BOOST_TEST(out.find("\"permits\":2") != std::string::npos, out);
    p1.signal(SIGTERM);
    BOOST_TEST(p1.read_line(30s).value_or("<eof>") == "got-term");
    BOOST_TEST(p1.wait() == 3);
    BOOST_TEST(tool({"run", "--url", url, "--permits", "2", "--wait", "5s", "pool", "--", "/bin/echo", "ran"}, &out) ==
                   0,
               out);
    BOOST_TEST(out.find("ran") != std::string::npos, out);
    p2.signal(SIGTERM);
    BOOST_TEST(p2.read_line(30s).value_or("<eof>") == "got-term");
    BOOST_TEST(p2.wait() == 3);
}

/// The tool at `url`: `dlock run --shared` runs beside another reader, `--exclusive` and the
/// plain form (a mutex) do not, the latter told which flags to use; status names the kind;
/// once the reader is stopped, the writer runs. `cli` is the dlock tool's path.
inline void the_tool_runs_readers_together_and_a_writer_alone(const std::string& cli, const std::string& url)
{
    auto tool = [&](std::vector<std::string> args, std::string* out = nullptr) { return run_tool(cli, args, out); };
    child reader({cli, "run", "--url", url, "--shared", "doc", "--", "/bin/sh", "-c", tool_holder});
    BOOST_TEST_REQUIRE(reader.read_line(60s).value_or("<eof>") == "held");
    std::string out;
    BOOST_TEST(tool({"run", "--url", url, "--shared", "--wait", "0", "doc", "--", "/bin/echo", "reading"}, &out) == 0,
               out);
    BOOST_TEST(out.find("reading") != std::string::npos, out);
    BOOST_TEST(tool({"run", "--url", url, "--exclusive", "--wait", "0", "doc", "--", "true"}, &out) == 75, out);
    BOOST_TEST(tool({"run", "--url", url, "--wait", "0", "doc", "--", "/bin/echo", "ran"}, &out) == 65, out);
    BOOST_TEST(out.find("'doc' is held as a read-write lock: use --shared or --exclusive") != std::string::npos, out);
    BOOST_TEST(tool({"status", "--url", url, "--json", "doc"}, &out) == 0, out);
    BOOST_TEST(out.find("\"kind\":\"rw_lock\"") != std::string::npos, out);
    reader.signal(SIGTERM);
    BOOST_TEST(reader.read_line(30s).value_or("<eof>") == "got-term");
    BOOST_TEST(reader.wait() == 3);
    BOOST_TEST(tool({"run", "--url", url, "--exclusive", "--wait", "0", "doc", "--", "true"}, &out) == 0, out);
}

/// A lock_worker at `where` holds the one permit of "k" and is killed: this process's
/// semaphore on `store` is refused while the worker lives and gets the permit after its lease.
inline void a_killed_holders_permit_comes_back(const std::string& where, boost::asio::io_context& io,
                                               dlock::store& store)
{
    namespace asio = boost::asio;
    child holder({worker_path(), "hold", where, "k", "1000", "permits=1"});
    auto line = holder.read_line();
    BOOST_REQUIRE((line && line->rfind("acquired", 0) == 0));
    dlock::registry reg(store, {.lease = 1s});
    auto sem = reg.obtain_semaphore("k", 1);
    boost::system::error_code ec;
    bool refused_while_alive = false, got = false;
    spawn(io, [&]() -> asio::awaitable<void> {
        auto first = co_await sem.try_acquire();
        refused_while_alive = !first;
        holder.signal(SIGKILL);
        holder.wait();
        auto g = co_await sem.acquire_for(10s, asio::redirect_error(asio::use_awaitable, ec));
        got = g.owns_lock();
        co_await g.release();
        store.close();
    });
    io.run_for(20s);
    BOOST_TEST(refused_while_alive);
    BOOST_TEST(!ec);
    BOOST_TEST(got);
}

}  // namespace dlock::test::rw
