// SPDX-License-Identifier: BSL-1.0
// The read-write lock on a real ZooKeeper ensemble, in Curator's InterProcessReadWriteLock
// layout: the scenarios every store with the primitive runs (rw_scenarios.hpp), and Curator's
// readers and writers sharing the lock with dlock's, counted on one log and step by step.
#include "integration/consensus/zookeeper_family.hpp"
#include "integration/curator.hpp"
#include "integration/rw_scenarios.hpp"
#include "integration/support.hpp"

#include <filesystem>

using namespace dlock::test;  // its asio alias and chrono literals too

namespace {

// What the store tells of a name once everything is over: no contender's node left.
bool left_nothing(const std::string& url, const std::vector<std::string>& names)
{
    asio::io_context io;
    dlock::zookeeper_store store(io.get_executor(), zookeeper_family::config_of(url));
    bool clean = true;
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            for (auto& n : names) {
                auto s = co_await store.async_status(n, asio::use_awaitable);
                BOOST_TEST(!s.held, n << " is still held by " << s.key);
                BOOST_TEST(s.queued == 0u, n << " has queued nodes");
                clean = clean && !s.held && s.queued == 0;
            }
            store.close();
        },
        30s);
    return clean;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zookeeper_rw)

// Readers share and writers exclude across processes; a writer gets in while a stream of
// readers never lets go; nothing is left behind.
BOOST_AUTO_TEST_CASE(readers_share_writers_exclude_and_a_writer_is_not_starved)
{
    zk_ensemble z;
    auto dir = temp_dir("dlock-zkrw");
    auto url = z.url("?session_timeout=4s");
    rw::readers_share_writers_exclude(url, dir + "/log");
    rw::a_writer_gets_in_while_readers_keep_arriving(url, dir + "/stream");
    BOOST_TEST(left_nothing(url, {"dlock:rw", "dlock:stream"}));
    std::filesystem::remove_all(dir);
}

// Java services on Curator's InterProcessReadWriteLock and dlock processes on one path: a
// writer of either never overlaps anyone, readers overlap, and the writers' fencing tokens
// (czxids, both sides log them) rise in log order.
BOOST_AUTO_TEST_CASE(interop_with_curator_counts_sections)
{
    zk_ensemble z;
    curator_dir();  // compiled before the clock starts mattering
    auto dir = temp_dir("dlock-zkrw");
    auto log = dir + "/log";
    auto url = z.url("?session_timeout=4s");
    // lock_worker's registry puts "dlock:" before the name: Curator locks /dlock/dlock:mixed.
    std::vector<std::unique_ptr<child>> procs;
    procs.push_back(std::make_unique<child>(
        curator({"sections", z.connect_string(), "/dlock/dlock:mixed", "read", "2", "15", "10", log})));
    procs.push_back(std::make_unique<child>(
        curator({"sections", z.connect_string(), "/dlock/dlock:mixed", "write", "1", "10", "3", log})));
    procs.push_back(rw::sections(url, "mixed", "read", 3, 15, 10, log));
    procs.push_back(rw::sections(url, "mixed", "write", 2, 10, 3, log));
    expect_all_done(procs);
    auto r = read_sections_log(log);
    BOOST_TEST(r.begins == 2u * 15 + 10 + 3u * 15 + 2u * 10);
    BOOST_TEST(r.ends == r.begins);
    BOOST_TEST(r.well_formed);
    BOOST_TEST(r.writer_alone);
    BOOST_TEST(r.writer_tokens_rise);
    BOOST_TEST(r.max_readers > 1u, "max readers inside at once: " << r.max_readers);
    BOOST_TEST(left_nothing(url, {"dlock:mixed"}));
    std::filesystem::remove_all(dir);
}

// Step by step, both ways: a Curator reader and a dlock reader hold at once, a dlock writer
// is refused while they do and queues behind them, and gets the lock when Curator's reader
// goes; then a Curator reader queues behind dlock's writer and gets in only after its release.
// A Curator InterProcessMutex on another path refuses dlock's reader as another kind of lock.
BOOST_AUTO_TEST_CASE(interop_with_curator_step_by_step)
{
    zk_ensemble z;
    curator_dir();
    asio::io_context io;
    dlock::zookeeper_store store(io.get_executor(), zookeeper_family::config_of(z.url("?session_timeout=4s")));
    dlock::registry reg(store, {.lease = 3s});
    child reader(curator({"hold-rw", z.connect_string(), "/dlock/dlock:steps", "read", "3000"}));
    child mutex(curator({"hold", z.connect_string(), "/dlock/dlock:a-mutex", "3000"}));
    auto line = reader.read_line(60s);
    BOOST_REQUIRE((line && line->rfind("acquired ", 0) == 0));
    std::uint64_t java_token = std::stoull(line->substr(9));
    line = mutex.read_line(60s);
    BOOST_REQUIRE((line && line->rfind("acquired ", 0) == 0));
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto rw = reg.obtain_rw("steps");
            auto mine = co_await rw.read().try_acquire();
            BOOST_TEST(mine.owns_lock(), "dlock's reader beside Curator's");
            auto s = co_await store.async_status("dlock:steps", asio::use_awaitable);
            BOOST_TEST((s.kind == dlock::lease_kind::read));
            BOOST_TEST(s.holders == 2u);
            BOOST_TEST(!s.writer);
            co_await mine.release();
            auto [ec, none] = co_await rw.write().try_acquire(asio::as_tuple(asio::use_awaitable));
            BOOST_TEST(!ec, ec.message());
            BOOST_TEST(!none, "a writer beside Curator's reader");
            // Curator's mutex: dlock's reader is refused, with the kind in use named.
            auto [mec, mg] = co_await reg.obtain_rw("a-mutex").read().try_acquire(asio::as_tuple(asio::use_awaitable));
            BOOST_TEST(mec == dlock::error::kind_mismatch, mec.message());
            BOOST_TEST(store.last_error_text().find("a mutex") != std::string::npos, store.last_error_text());
            // dlock's writer queues and gets it once Curator's reader goes, with a larger token.
            auto w = co_await rw.write().acquire_for(30s);
            BOOST_TEST(w.fencing_token() > java_token);
            BOOST_TEST(reader.read_line(10s).value_or("") == "released");
            // dlock's writer holds: Curator's reader queues behind it until the release.
            child later(curator({"hold-rw", z.connect_string(), "/dlock/dlock:steps", "read", "10"}));
            co_await hand_to_curator(store, "dlock:steps", w, later);
            BOOST_TEST(later.read_line(10s).value_or("") == "released");
            BOOST_TEST(later.wait() == 0);
            co_await reg.async_drain();
            store.close();
        },
        120s);
    BOOST_TEST(reader.wait() == 0);
    BOOST_TEST(mutex.wait() == 0);
}

#ifdef DLOCK_CLI_PATH
BOOST_AUTO_TEST_CASE(the_tool_runs_readers_together_and_a_writer_alone)
{
    zk_ensemble z(1);
    rw::the_tool_runs_readers_together_and_a_writer_alone(DLOCK_CLI_PATH, z.url("?session_timeout=4s"));
}
#endif

BOOST_AUTO_TEST_SUITE_END()
