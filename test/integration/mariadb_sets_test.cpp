// SPDX-License-Identifier: BSL-1.0
// Read-write locks and semaphores on a throwaway MariaDB, with real worker processes: the
// read-write scenarios every store with the primitive runs (rw_scenarios.hpp), a semaphore
// that never exceeds its permits and gets a killed holder's permit back, one kind per name
// (mutex, read-write lock, semaphore of N), cancelled waiters leaving no row, and the tool.
#include <dlock/dlock.hpp>

#include "integration/consensus/support.hpp"  // temp_dir
#include "integration/rw_scenarios.hpp"
#include "integration/sql/mariadb_family.hpp"
#include "integration/sql/scenarios.hpp"  // use_tuple

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>

using namespace dlock::test;  // its asio alias and chrono literals too
using dlock::test::sql::use_tuple;

namespace {

mariadb_server& srv()
{
    return mariadb_family::server();
}

// Rows of `name` in the sets' tables and its marker in the lease table.
long set_rows(const std::string& name)
{
    const auto n = mariadb_family::literal(name);
    return mariadb_family::count("SELECT (SELECT COUNT(*) FROM dlock.dlock_locks_set WHERE name = " + n +
                                 ") + (SELECT COUNT(*) FROM dlock.dlock_locks_set_queue WHERE name = " + n +
                                 ") + (SELECT COUNT(*) FROM dlock.dlock_locks WHERE name = " + n + ")");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(mariadb_sets)

BOOST_AUTO_TEST_CASE(readers_share_writers_exclude_and_a_writer_is_not_starved)
{
    auto dir = temp_dir("dlock-mdbrw");
    rw::readers_share_writers_exclude(srv().url(), dir + "/log");
    rw::a_writer_gets_in_while_readers_keep_arriving(srv().url(), dir + "/stream");
    BOOST_TEST(set_rows("dlock:rw") == 0);
    BOOST_TEST(set_rows("dlock:stream") == 0);
}

BOOST_AUTO_TEST_CASE(a_semaphore_never_exceeds_its_permits)
{
    auto log = temp_dir("dlock-mdbsem") + "/log";
    std::vector<std::unique_ptr<child>> ws;
    for (int p = 0; p < 3; ++p)
        ws.push_back(rw::sections(srv().url(), "sem", "permits=3", 4, 15, 5, log));
    for (auto& w : ws)
        expect_done(*w);
    auto r = read_sections_log(log);
    BOOST_TEST(r.begins == 3u * 4 * 15);
    BOOST_TEST(r.well_formed);
    BOOST_TEST(r.tokens_unique);
    BOOST_TEST(r.max_inside <= 3u, "most permits held at once: " << r.max_inside);
    BOOST_TEST(r.max_inside == 3u, "all 3 permits were in use at some point: " << r.max_inside);
    BOOST_TEST(set_rows("dlock:sem") == 0);
}

BOOST_AUTO_TEST_CASE(a_killed_holders_permit_comes_back)
{
    asio::io_context io;
    dlock::mariadb_store store(io.get_executor(), srv().config());
    rw::a_killed_holders_permit_comes_back(srv().url(), io, store);
    BOOST_TEST(set_rows("dlock:k") == 0);
}

// One name, one kind: a mutex, a read-write lock and semaphores of other sizes each refuse
// the name while another holds or waits on it, with kind_mismatch and what it is.
BOOST_AUTO_TEST_CASE(a_name_is_one_kind)
{
    asio::io_context io;
    dlock::mariadb_store a(io.get_executor(), srv().config()), b(io.get_executor(), srv().config());
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
            auto st = co_await a.async_status("dlock:one", asio::use_awaitable);
            BOOST_TEST(st.held);
            BOOST_TEST((st.kind == dlock::lease_kind::permit));
            BOOST_TEST(st.capacity == 2u);
            BOOST_TEST(st.holders == 1u);
            BOOST_TEST(st.fencing_token == sem.fencing_token());
            BOOST_TEST((co_await rb.obtain_semaphore("one", 2).available()) == 1u);
            auto [e_size, n_size] = co_await rb.obtain_semaphore("one", 3).available(use_tuple);
            BOOST_TEST(e_size == dlock::error::kind_mismatch, e_size.message());
            co_await sem.release();
            // Free again, the name may be anything.
            auto m = co_await rb.obtain("one").acquire();
            auto [e4, g4] = co_await ra.obtain_rw("one").write().try_acquire(use_tuple);
            BOOST_TEST(e4 == dlock::error::kind_mismatch, e4.message());
            BOOST_TEST(a.last_error_text().find("a mutex") != std::string::npos, a.last_error_text());
            co_await m.release();
            a.close();
            b.close();
        },
        30s);
    BOOST_TEST(set_rows("dlock:one") == 0);
}

// A reader and a permit waiter queue at the store (their queue rows), are cancelled and
// leave nothing: once the holders release, no row of either name is left; the queued writer
// behind them is handed its lease by the release (rung, not waiting out a lease).
BOOST_AUTO_TEST_CASE(cancelled_waiters_leave_nothing_behind)
{
    asio::io_context io;
    dlock::mariadb_store a(io.get_executor(), srv().config()), b(io.get_executor(), srv().config());
    dlock::registry ra(a, {.lease = 5s}), rb(b, {.lease = 5s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto w = co_await ra.obtain_rw("c").write().acquire();
            auto p = co_await ra.obtain_semaphore("s", 1).acquire();
            asio::cancellation_signal stop_r, stop_p;
            int ended = 0;
            boost::system::error_code ec_r, ec_p;
            rb.obtain_rw("c").read().acquire(
                asio::bind_cancellation_slot(stop_r.slot(), [&](boost::system::error_code ec, dlock::guard) {
                    ec_r = ec;
                    ++ended;
                }));
            rb.obtain_semaphore("s", 1).acquire(
                asio::bind_cancellation_slot(stop_p.slot(), [&](boost::system::error_code ec, dlock::guard) {
                    ec_p = ec;
                    ++ended;
                }));
            auto queued = [] {
                return mariadb_family::count(
                    "SELECT COUNT(*) FROM dlock.dlock_locks_set_queue WHERE name IN ('dlock:c', 'dlock:s')");
            };
            BOOST_TEST(co_await eventually([&] { return queued() == 2; }));
            auto st = co_await a.async_status("dlock:c", asio::use_awaitable);
            BOOST_TEST(st.queued == 1u);
            BOOST_TEST(st.writer);
            BOOST_TEST((st.kind == dlock::lease_kind::read));
            stop_r.emit(asio::cancellation_type::terminal);
            stop_p.emit(asio::cancellation_type::terminal);
            BOOST_TEST(co_await eventually([&] { return ended == 2; }));
            BOOST_TEST(ec_r == asio::error::operation_aborted);
            BOOST_TEST(ec_p == asio::error::operation_aborted);
            BOOST_TEST(co_await eventually([&] { return queued() == 0; }));
            // A writer queued behind the holder gets the name from the release.
            std::optional<std::uint64_t> writer;
            asio::co_spawn(
                io,
                [&]() -> asio::awaitable<void> {
                    auto g = co_await rb.obtain_rw("c").write().acquire();
                    writer = g.fencing_token();
                    co_await g.release();
                },
                asio::detached);
            BOOST_TEST(co_await eventually([&] { return queued() == 1; }));
            co_await w.release();
            BOOST_TEST(co_await eventually([&] { return writer.has_value(); }));
            BOOST_TEST(rb.stats().woken_by_timer == 0u);
            co_await p.release();
            co_await ra.async_drain();
            co_await rb.async_drain();
            BOOST_TEST(co_await eventually([] { return mariadb_enrolled("dlock:c") == 0; }));
            a.close();
            b.close();
        },
        30s);
    BOOST_TEST(set_rows("dlock:c") == 0);
    BOOST_TEST(set_rows("dlock:s") == 0);
}

// The operator's override on a set's name frees every lease; on a free name it answers false
// without touching the sets; on a mutex's name it frees the mutex and leaves the sets alone.
BOOST_AUTO_TEST_CASE(force_release_frees_a_sets_every_lease)
{
    asio::io_context io;
    dlock::mariadb_store st(io.get_executor(), srv().config());
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            const std::string name = "forced";
            const dlock::lease_request r1{name, "r1", 30s, dlock::lease_kind::read, 1, false},
                r2{name, "r2", 30s, dlock::lease_kind::read, 1, false};
            BOOST_TEST((co_await st.async_try_acquire(r1, asio::use_awaitable)).acquired);
            BOOST_TEST((co_await st.async_try_acquire(r2, asio::use_awaitable)).acquired);
            BOOST_TEST((co_await st.async_status(name, asio::use_awaitable)).holders == 2u);
            // A mutex's release by another token never touches the set's marker.
            BOOST_TEST(!(co_await st.async_release(name, "r1", asio::use_awaitable)));
            BOOST_TEST((co_await st.async_status(name, asio::use_awaitable)).holders == 2u);
            BOOST_TEST((co_await st.async_force_release(name, asio::use_awaitable)));
            BOOST_TEST(!(co_await st.async_status(name, asio::use_awaitable)).held);
            BOOST_TEST(set_rows(name) == 0);
            const std::string free_name = "never-taken";
            BOOST_TEST(!(co_await st.async_force_release(free_name, asio::use_awaitable)));
            st.close();
        },
        30s);
}

#ifdef DLOCK_CLI_PATH
BOOST_AUTO_TEST_CASE(the_tool_runs_readers_together_and_a_writer_alone)
{
    rw::the_tool_runs_readers_together_and_a_writer_alone(DLOCK_CLI_PATH, srv().url());
}

BOOST_AUTO_TEST_CASE(the_tool_counts_permits)
{
    rw::the_tool_counts_permits(DLOCK_CLI_PATH, srv().url());
    BOOST_TEST(set_rows("dlock:pool") == 0);
}
#endif

BOOST_AUTO_TEST_SUITE_END()
