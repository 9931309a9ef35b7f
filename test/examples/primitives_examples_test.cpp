// SPDX-License-Identifier: BSL-1.0
// The examples of each primitive (read_write_lock, semaphore, latch, election) and the
// threads example, run as a user runs them against a redis-server the test starts. Each checks its own result and exits
// 0 only if every check passed; here we also read what it printed.
#include "common/redis_server.hpp"
#include "run_example.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using dlock::test::redis_server;

namespace {

using outcome = dlock::test::example_run;

outcome run(const char* example, const std::string& url)
{
    return dlock::test::run_example({example, url}, std::chrono::seconds(45));
}

// Passes against a fresh server, twice in a row on the same one (nothing left behind that
// would fail a second run), and fails (exit 1) against a port nobody listens on.
outcome passes(const char* example)
{
    redis_server srv;
    outcome o;
    for (int i = 0; i < 2; ++i) {
        o = run(example, srv.url());
        BOOST_TEST_INFO("run " << i << " output:\n" << o.text());
        BOOST_TEST(o.status == 0);
        BOOST_TEST((!o.lines.empty() && o.lines.back() == "ok"));
    }
    auto down = run(example, "redis://127.0.0.1:" + std::to_string(dlock::test::free_port()));
    BOOST_TEST_INFO("unreachable: output:\n" << down.text());
    BOOST_TEST(down.status == 1);
    return o;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(primitive_examples)

BOOST_AUTO_TEST_CASE(read_write_lock)
{
    auto o = passes(DLOCK_EXAMPLE_READ_WRITE_LOCK);
    BOOST_TEST_INFO("output:\n" << o.text());
    BOOST_TEST(o.lines.size() == 3u);  // two readers, the writer, ok
}

BOOST_AUTO_TEST_CASE(semaphore)
{
    auto o = passes(DLOCK_EXAMPLE_SEMAPHORE);
    BOOST_TEST_INFO("output:\n" << o.text());
    BOOST_TEST((o.has("5 jobs done, at most 2 at once") || o.has("5 jobs done, at most 1 at once")));
}

BOOST_AUTO_TEST_CASE(latch)
{
    auto o = passes(DLOCK_EXAMPLE_LATCH);
    BOOST_TEST_INFO("output:\n" << o.text());
    BOOST_TEST(o.has("worker-3 counted down, 0 left"));
    BOOST_TEST(o.has("the coordinator saw all 3 workers"));
}

BOOST_AUTO_TEST_CASE(election)
{
    auto o = passes(DLOCK_EXAMPLE_ELECTION);
    BOOST_TEST_INFO("output:\n" << o.text());
    BOOST_TEST(o.lines.size() >= 3u);  // A leads, [observer lines,] B leads, ok
}

// 4 threads run the io_context; the example checks where each part runs (docs/threading.md).
BOOST_AUTO_TEST_CASE(threads)
{
    auto o = passes(DLOCK_EXAMPLE_THREADS);
    BOOST_TEST_INFO("output:\n" << o.text());
    BOOST_TEST(o.has("40 requests done on 4 threads"));
}

BOOST_AUTO_TEST_CASE(bad_url_exits_2)
{
    for (const char* example : {DLOCK_EXAMPLE_READ_WRITE_LOCK, DLOCK_EXAMPLE_SEMAPHORE, DLOCK_EXAMPLE_LATCH,
                                DLOCK_EXAMPLE_ELECTION, DLOCK_EXAMPLE_THREADS}) {
        auto o = run(example, "http://127.0.0.1:6379");
        BOOST_TEST_INFO(example << " output:\n" << o.text());
        BOOST_TEST(o.status == 2);
        BOOST_TEST(o.lines.empty());
    }
}

BOOST_AUTO_TEST_SUITE_END()
