// SPDX-License-Identifier: BSL-1.0
// The semaphore on a real ZooKeeper ensemble, in Curator's InterProcessSemaphoreV2 layout:
// processes that never hold more than the permits, Curator's semaphore and dlock's counted
// together on one log and step by step, a killed holder's permit back, one kind per name,
// cancelled waiters leaving no node, and the tool. One ensemble for the suite.
#include "integration/consensus/zookeeper_family.hpp"
#include "integration/curator.hpp"
#include "integration/rw_scenarios.hpp"
#include "integration/support.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <signal.h>

#include <filesystem>

using namespace dlock::test;  // its asio alias and chrono literals too

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// The suite's ensemble: started before its first case, stopped after its last.
std::unique_ptr<zk_ensemble> shared;
struct one_ensemble {
    one_ensemble() { shared = std::make_unique<zk_ensemble>(); }
    ~one_ensemble() { shared.reset(); }
};

zk_ensemble& ensemble()
{
    return *shared;
}

std::string url()
{
    return ensemble().url("?session_timeout=4s");
}

// Nothing of `names` is left: no lease under `leases`, no acquirer under `locks`.
bool left_nothing(const std::vector<std::string>& names)
{
    asio::io_context io;
    dlock::zookeeper_store store(io.get_executor(), zookeeper_family::config_of(url()));
    bool clean = true;
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            for (auto& n : names) {
                auto s = co_await store.async_status(n, asio::use_awaitable);
                BOOST_TEST(!s.held, n << " still has " << s.holders << " leases under " << s.key);
                BOOST_TEST(s.queued == 0u, n << " has acquirers under its locks");
                clean = clean && !s.held && s.queued == 0;
            }
            store.close();
        },
        30s);
    return clean;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zookeeper_semaphore, *boost::unit_test::fixture<one_ensemble>())

// Three processes of three coroutines on a semaphore of 2: never more than 2 inside, both
// permits used, every token once.
BOOST_AUTO_TEST_CASE(a_semaphore_never_exceeds_its_permits)
{
    auto dir = temp_dir("dlock-zksem");
    auto log = dir + "/log";
    std::vector<std::unique_ptr<child>> ws;
    for (int p = 0; p < 3; ++p)
        ws.push_back(rw::sections(url(), "sem", "permits=2", 3, 10, 5, log));
    expect_all_done(ws);
    auto r = read_sections_log(log);
    BOOST_TEST(r.begins == 3u * 3 * 10);
    BOOST_TEST(r.ends == r.begins);
    BOOST_TEST(r.well_formed);
    BOOST_TEST(r.tokens_unique);
    BOOST_TEST(r.max_inside <= 2u, "most permits held at once: " << r.max_inside);
    BOOST_TEST(r.max_inside == 2u, "both permits were in use at some point: " << r.max_inside);
    BOOST_TEST(left_nothing({"dlock:sem"}));
    std::filesystem::remove_all(dir);
}

// Java services on Curator's InterProcessSemaphoreV2 and dlock processes on one path, with
// the same number of permits: together never more than 3 inside, counted outside both.
BOOST_AUTO_TEST_CASE(interop_with_curator_counts_permits)
{
    curator_dir();  // compiled before the clock starts mattering
    auto dir = temp_dir("dlock-zksem");
    auto log = dir + "/log";
    // lock_worker's registry puts "dlock:" before the name: Curator's path is /dlock/dlock:mixed.
    std::vector<std::unique_ptr<child>> procs;
    procs.push_back(std::make_unique<child>(
        curator({"sections", ensemble().connect_string(), "/dlock/dlock:mixed", "permits=3", "3", "10", "10", log})));
    procs.push_back(rw::sections(url(), "mixed", "permits=3", 3, 10, 10, log));
    procs.push_back(rw::sections(url(), "mixed", "permits=3", 2, 10, 10, log));
    expect_all_done(procs);
    auto r = read_sections_log(log);
    BOOST_TEST(r.begins == 3u * 10 + 3u * 10 + 2u * 10);
    BOOST_TEST(r.ends == r.begins);
    BOOST_TEST(r.well_formed);
    BOOST_TEST(r.tokens_unique);
    BOOST_TEST(r.max_inside <= 3u, "most permits held at once: " << r.max_inside);
    BOOST_TEST(r.max_inside > 1u, "permits held at once: " << r.max_inside);
    BOOST_TEST(left_nothing({"dlock:mixed"}));
    std::filesystem::remove_all(dir);
}

// Step by step: Curator holds one of 2 permits, dlock takes the other and a second dlock
// try is refused; a dlock waiter queues (under `locks`, as Curator's do) and gets the
// permit Curator returns, with a larger token; then a Curator acquirer waits for dlock's.
BOOST_AUTO_TEST_CASE(interop_with_curator_step_by_step)
{
    curator_dir();
    asio::io_context io;
    dlock::zookeeper_store store(io.get_executor(), zookeeper_family::config_of(url()));
    dlock::registry reg(store, {.lease = 3s});
    child java(curator({"hold-rw", ensemble().connect_string(), "/dlock/dlock:steps", "permits=2", "2000"}));
    auto line = java.read_line(60s);
    BOOST_REQUIRE((line && line->rfind("acquired ", 0) == 0));
    std::uint64_t java_token = std::stoull(line->substr(9));
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto sem = reg.obtain_semaphore("steps", 2);
            BOOST_TEST((co_await sem.available()) == 1u);  // Curator's permit counts
            auto mine = co_await sem.try_acquire();
            BOOST_TEST(mine.owns_lock(), "dlock's permit beside Curator's");
            auto s = co_await store.async_status("dlock:steps", asio::use_awaitable);
            BOOST_TEST((s.kind == dlock::lease_kind::permit));
            BOOST_TEST(s.holders == 2u);
            BOOST_TEST(s.capacity == 2u);
            BOOST_TEST((co_await sem.available()) == 0u);
            auto [ec, none] = co_await sem.try_acquire(use_tuple);
            BOOST_TEST(!ec, ec.message());
            BOOST_TEST(!none, "a third permit of 2");
            // Curator's permit comes back when its process returns it: the waiter gets it.
            auto next = co_await sem.acquire_for(30s);
            BOOST_TEST(next.fencing_token() > java_token);
            BOOST_TEST(java.read_line(10s).value_or("") == "released");
            // Both permits are dlock's: a Curator acquirer waits under `locks` until one goes.
            child later(curator({"hold-rw", ensemble().connect_string(), "/dlock/dlock:steps", "permits=2", "10"}));
            auto queued = co_await status_until(store, "dlock:steps", [](auto& s) { return s.queued > 0; });
            BOOST_TEST(queued.queued == 1u);
            BOOST_TEST(queued.holders == 2u);
            auto token = next.fencing_token();
            co_await next.release();
            auto got = later.read_line(30s);
            BOOST_REQUIRE((got && got->rfind("acquired ", 0) == 0));
            BOOST_TEST(std::stoull(got->substr(9)) > token);
            BOOST_TEST(later.read_line(10s).value_or("") == "released");
            BOOST_TEST(later.wait() == 0);
            co_await mine.release();
            co_await reg.async_drain();
            store.close();
        },
        120s);
    BOOST_TEST(java.wait() == 0);
    BOOST_TEST(left_nothing({"dlock:steps"}));
}

BOOST_AUTO_TEST_CASE(a_killed_holders_permit_comes_back)
{
    child holder({worker_path(), "hold", url(), "k", "1000", "permits=1"});
    auto line = holder.read_line(30s);
    BOOST_REQUIRE((line && line->rfind("acquired", 0) == 0));
    asio::io_context io;
    dlock::zookeeper_store store(io.get_executor(), zookeeper_family::config_of(url()));
    dlock::registry reg(store, {.lease = 1s});
    auto sem = reg.obtain_semaphore("k", 1);
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto first = co_await sem.try_acquire();
            BOOST_TEST(!first.owns_lock());
            holder.signal(SIGKILL);
            holder.wait();
            // Its session ends within the session timeout (4 s): its lease node with it.
            auto [ec, g] = co_await sem.acquire_for(20s, use_tuple);
            BOOST_TEST(!ec, ec.message());
            BOOST_TEST(g.owns_lock());
            co_await g.release();
            store.close();
        },
        40s);
    BOOST_TEST(left_nothing({"dlock:k"}));
}

// One name, one kind: a semaphore refuses a mutex, a read-write lock and a semaphore of
// another size, and a mutex refuses a semaphore, each with kind_mismatch and what it is.
BOOST_AUTO_TEST_CASE(a_name_is_one_kind)
{
    asio::io_context io;
    dlock::zookeeper_store a(io.get_executor(), zookeeper_family::config_of(url()));
    dlock::zookeeper_store b(io.get_executor(), zookeeper_family::config_of(url()));
    dlock::registry ra(a, {.lease = 5s}), rb(b, {.lease = 5s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto sem = co_await ra.obtain_semaphore("one", 2).acquire();
            auto [e1, g1] = co_await rb.obtain("one").try_acquire(use_tuple);
            BOOST_TEST(e1 == dlock::error::kind_mismatch, e1.message());
            BOOST_TEST(b.last_error_text().find("a semaphore of 2 permits") != std::string::npos, b.last_error_text());
            auto [e2, g2] = co_await rb.obtain_semaphore("one", 3).try_acquire(use_tuple);
            BOOST_TEST(e2 == dlock::error::kind_mismatch, e2.message());
            BOOST_TEST(b.last_error_text().find("a semaphore of 2 permits") != std::string::npos, b.last_error_text());
            auto [e3, g3] = co_await rb.obtain_rw("one").read().try_acquire(use_tuple);
            BOOST_TEST(e3 == dlock::error::kind_mismatch, e3.message());
            co_await sem.release();
            // Free again (its empty containers may linger), the name may be a mutex; then a
            // semaphore is refused while the mutex holds.
            auto m = co_await rb.obtain("one").acquire();
            auto [e4, g4] = co_await ra.obtain_semaphore("one", 2).try_acquire(use_tuple);
            BOOST_TEST(e4 == dlock::error::kind_mismatch, e4.message());
            BOOST_TEST(a.last_error_text().find("a mutex") != std::string::npos, a.last_error_text());
            co_await m.release();
            co_await ra.async_drain();
            co_await rb.async_drain();
            a.close();
            b.close();
        },
        60s);
    BOOST_TEST(left_nothing({"dlock:one"}));
}

// Two waiters, one queued under `locks` behind the other, which holds `locks` while both
// permits are taken; both cancelled: neither leaves a node, and the holders' releases
// leave the semaphore empty.
BOOST_AUTO_TEST_CASE(cancelled_waiters_leave_nothing_behind)
{
    asio::io_context io;
    dlock::zookeeper_store a(io.get_executor(), zookeeper_family::config_of(url()));
    dlock::zookeeper_store b(io.get_executor(), zookeeper_family::config_of(url()));
    dlock::zookeeper_store c(io.get_executor(), zookeeper_family::config_of(url()));
    dlock::registry ra(a, {.lease = 5s}), rb(b, {.lease = 5s}), rc(c, {.lease = 5s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto p1 = co_await ra.obtain_semaphore("s", 2).acquire();
            auto p2 = co_await ra.obtain_semaphore("s", 2).acquire();
            asio::cancellation_signal stop_b, stop_c;
            int ended = 0;
            boost::system::error_code ec_b, ec_c;
            auto wait_on = [&](dlock::registry& r, asio::cancellation_signal& stop, boost::system::error_code& out) {
                r.obtain_semaphore("s", 2).acquire(
                    asio::bind_cancellation_slot(stop.slot(), [&](boost::system::error_code ec, dlock::guard) {
                        out = ec;
                        ++ended;
                    }));
            };
            wait_on(rb, stop_b, ec_b);
            auto one = co_await status_until(a, "dlock:s", [](auto& s) { return s.queued == 1; });
            BOOST_TEST(one.queued == 1u);
            wait_on(rc, stop_c, ec_c);
            auto two = co_await status_until(a, "dlock:s", [](auto& s) { return s.queued == 2; });
            BOOST_TEST(two.queued == 2u);
            BOOST_TEST(two.holders == 2u);
            stop_b.emit(asio::cancellation_type::terminal);
            stop_c.emit(asio::cancellation_type::terminal);
            BOOST_TEST(co_await eventually([&] { return ended == 2; }));
            BOOST_TEST(ec_b == asio::error::operation_aborted);
            BOOST_TEST(ec_c == asio::error::operation_aborted);
            auto after = co_await status_until(a, "dlock:s", [](auto& s) { return s.queued == 0; });
            BOOST_TEST(after.queued == 0u);
            BOOST_TEST(after.holders == 2u);
            co_await p1.release();
            co_await p2.release();
            co_await ra.async_drain();
            co_await rb.async_drain();
            co_await rc.async_drain();
            a.close();
            b.close();
            c.close();
        },
        60s);
    BOOST_TEST(left_nothing({"dlock:s"}));
}

#ifdef DLOCK_CLI_PATH
BOOST_AUTO_TEST_CASE(the_tool_counts_permits)
{
    rw::the_tool_counts_permits(DLOCK_CLI_PATH, url());
    BOOST_TEST(left_nothing({"dlock:pool"}));
}
#endif

BOOST_AUTO_TEST_SUITE_END()
