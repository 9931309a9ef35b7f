// SPDX-License-Identifier: BSL-1.0
// Read-write locks and semaphores on a real etcd cluster: the read-write scenarios every
// store with the primitive runs (rw_scenarios.hpp), in the layout of etcd's contrib RWMutex
// (src/etcd/rw.cpp), with `etcdctl lock` and a writer excluding each other; the semaphore in a
// layout of ours (src/etcd/permit.cpp): processes that never hold more than the permits, a
// killed holder's permit back with its lease, one kind per name (with `etcdctl lock` too),
// cancelled waiters leaving no key, and the tool. One cluster for the suite.
#include "common/child.hpp"
#include "integration/consensus/etcd_family.hpp"
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

// The suite's cluster: started before its first case, stopped after its last.
std::unique_ptr<etcd_cluster> shared;
struct one_cluster {
    one_cluster() { shared = std::make_unique<etcd_cluster>(); }
    ~one_cluster() { shared.reset(); }
};

dlock::etcd::config config()
{
    return etcd_family::config_of(shared->url());
}

// Nothing of `names` is left: no key in their ranges.
bool left_nothing(const std::vector<std::string>& names)
{
    asio::io_context io;
    dlock::etcd_store store(io.get_executor(), config());
    bool clean = true;
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            for (auto& n : names) {
                auto s = co_await store.async_status(n, asio::use_awaitable);
                BOOST_TEST(!s.held, n << " still has keys, the first " << s.key);
                clean = clean && !s.held;
            }
            store.close();
        },
        30s);
    return clean;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(etcd_sets, *boost::unit_test::fixture<one_cluster>())

// Readers share and writers exclude across processes; a writer gets in while a stream of
// readers never lets go; nothing is left behind.
BOOST_AUTO_TEST_CASE(readers_share_writers_exclude_and_a_writer_is_not_starved)
{
    auto dir = temp_dir("dlock-etcdrw");
    rw::readers_share_writers_exclude(shared->url(), dir + "/log");
    rw::a_writer_gets_in_while_readers_keep_arriving(shared->url(), dir + "/stream");
    BOOST_TEST(left_nothing({"dlock:rw", "dlock:stream"}));
    std::filesystem::remove_all(dir);
}

// `etcdctl lock NAME` and a dlock writer on NAME never hold at once: etcdctl's lock waits
// behind the writer's key, and a writer is refused while etcdctl's key is the name's first.
// A reader queued behind the writer is cancelled and leaves no key.
BOOST_AUTO_TEST_CASE(etcdctl_lock_and_a_writer_exclude_each_other)
{
    asio::io_context io;
    dlock::etcd_store a(io.get_executor(), config()), b(io.get_executor(), config());
    dlock::registry ra(a, {.lease = 5s}), rb(b, {.lease = 5s});
    std::unique_ptr<child> etcdctl;
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto w = co_await ra.obtain_rw("x").write().acquire();
            etcdctl = std::make_unique<child>(std::vector<std::string>{
                "/usr/bin/env", "ETCDCTL_API=3", "etcdctl", "--endpoints=" + shared->endpoints_csv(), "lock", "dlock:x",
                "--", "/bin/sh", "-c", "echo got; exec sleep 30"});
            auto queued = co_await status_until(a, "dlock:x", [](auto& s) { return s.queued > 0; });
            BOOST_TEST(queued.queued == 1u);
            BOOST_TEST(queued.writer);
            BOOST_TEST(!etcdctl->read_line(200ms).has_value(), "etcdctl lock ran while dlock's writer held");
            // A reader queued behind the writer, cancelled: its key goes.
            asio::cancellation_signal stop;
            std::optional<boost::system::error_code> ended;
            rb.obtain_rw("x").read().acquire(asio::bind_cancellation_slot(
                stop.slot(), [&](boost::system::error_code ec, dlock::guard) { ended = ec; }));
            auto two = co_await status_until(a, "dlock:x", [](auto& s) { return s.queued == 2; });
            BOOST_TEST(two.queued == 2u);
            stop.emit(asio::cancellation_type::terminal);
            BOOST_TEST(co_await eventually([&] { return ended.has_value(); }));
            BOOST_TEST((ended && *ended == asio::error::operation_aborted));
            auto one = co_await status_until(a, "dlock:x", [](auto& s) { return s.queued == 1; });
            BOOST_TEST(one.queued == 1u);
            co_await w.release();
            BOOST_TEST(etcdctl->read_line(20s).value_or("") == "got");
            // etcdctl's key is the name's first now: a writer is refused, naming it.
            auto [ec, g] = co_await rb.obtain_rw("x").write().try_acquire(use_tuple);
            BOOST_TEST(ec == dlock::error::kind_mismatch, ec.message());
            BOOST_TEST(b.last_error_text().find("a mutex") != std::string::npos, b.last_error_text());
            co_await ra.async_drain();
            co_await rb.async_drain();
            a.close();
            b.close();
        },
        60s);
    etcdctl->signal(SIGTERM);
    etcdctl->wait();
    BOOST_TEST(left_nothing({"dlock:x"}));
}

BOOST_AUTO_TEST_CASE(the_tool_runs_readers_together_and_a_writer_alone)
{
    rw::the_tool_runs_readers_together_and_a_writer_alone(DLOCK_CLI_PATH, shared->url());
    BOOST_TEST(left_nothing({"dlock:doc"}));
}

// Three processes of three coroutines on a semaphore of 2: never more than 2 inside, both
// permits used, every token once.
BOOST_AUTO_TEST_CASE(a_semaphore_never_exceeds_its_permits)
{
    auto dir = temp_dir("dlock-etcdsem");
    auto log = dir + "/log";
    std::vector<std::unique_ptr<child>> ws;
    for (int p = 0; p < 3; ++p)
        ws.push_back(rw::sections(shared->url(), "sem", "permits=2", 3, 10, 5, log));
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

// A holder killed with SIGKILL: its permit comes back when its etcd lease runs out.
BOOST_AUTO_TEST_CASE(a_killed_holders_permit_comes_back)
{
    child holder({worker_path(), "hold", shared->url(), "k", "1000", "permits=1"});
    auto line = holder.read_line(30s);
    BOOST_REQUIRE((line && line->rfind("acquired", 0) == 0));
    asio::io_context io;
    dlock::etcd_store store(io.get_executor(), config());
    dlock::registry reg(store, {.lease = 2s});
    auto sem = reg.obtain_semaphore("k", 1);
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            auto first = co_await sem.try_acquire();
            BOOST_TEST(!first.owns_lock());
            holder.signal(SIGKILL);
            holder.wait();
            auto [ec, g] = co_await sem.acquire_for(20s, use_tuple);
            BOOST_TEST(!ec, ec.message());
            BOOST_TEST(g.owns_lock());
            BOOST_TEST(g.fencing_token() > std::stoull(line->substr(9)));
            co_await g.release();
            store.close();
        },
        40s);
    BOOST_TEST(left_nothing({"dlock:k"}));
}

// One name, one kind: a semaphore refuses a mutex and a semaphore of another size, and a
// mutex (dlock's, or etcdctl lock's) refuses a semaphore, each with kind_mismatch and what it is.
BOOST_AUTO_TEST_CASE(a_name_is_one_kind)
{
    asio::io_context io;
    dlock::etcd_store a(io.get_executor(), config()), b(io.get_executor(), config());
    dlock::registry ra(a, {.lease = 5s}), rb(b, {.lease = 5s});
    child etcdctl({"/usr/bin/env", "ETCDCTL_API=3", "etcdctl", "--endpoints=" + shared->endpoints_csv(), "lock",
                   "dlock:held-by-etcdctl", "--", "/bin/sh", "-c", "echo held; exec sleep 30"});
    BOOST_TEST_REQUIRE(etcdctl.read_line(30s).value_or("") == "held");
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
            auto [e5, g5] = co_await rb.obtain_rw("one").read().try_acquire(use_tuple);
            BOOST_TEST(e5 == dlock::error::kind_mismatch, e5.message());
            auto st = co_await b.async_status("dlock:one", asio::use_awaitable);
            BOOST_TEST((st.kind == dlock::lease_kind::permit));
            BOOST_TEST(st.capacity == 2u);
            BOOST_TEST(st.holders == 1u);
            BOOST_TEST(st.fencing_token == sem.fencing_token());
            co_await sem.release();
            // Free again, the name may be a mutex; then a semaphore is refused while it holds.
            auto m = co_await rb.obtain("one").acquire();
            auto [e3, g3] = co_await ra.obtain_semaphore("one", 2).try_acquire(use_tuple);
            BOOST_TEST(e3 == dlock::error::kind_mismatch, e3.message());
            BOOST_TEST(a.last_error_text().find("a mutex") != std::string::npos, a.last_error_text());
            co_await m.release();
            // etcdctl lock's key refuses a semaphore too.
            auto [e4, g4] = co_await ra.obtain_semaphore("held-by-etcdctl", 2).try_acquire(use_tuple);
            BOOST_TEST(e4 == dlock::error::kind_mismatch, e4.message());
            BOOST_TEST(a.last_error_text().find("a mutex") != std::string::npos, a.last_error_text());
            co_await ra.async_drain();
            co_await rb.async_drain();
            a.close();
            b.close();
        },
        60s);
    etcdctl.signal(SIGTERM);
    etcdctl.wait();
    BOOST_TEST(left_nothing({"dlock:one"}));
}

// Two waiters while both permits are taken, both cancelled: neither leaves a key, and the
// holders' releases leave the name empty.
BOOST_AUTO_TEST_CASE(cancelled_waiters_leave_nothing_behind)
{
    asio::io_context io;
    dlock::etcd_store a(io.get_executor(), config()), b(io.get_executor(), config()), c(io.get_executor(), config());
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
            wait_on(rc, stop_c, ec_c);
            auto two = co_await status_until(a, "dlock:s", [](auto& s) { return s.queued == 2; });
            BOOST_TEST(two.queued == 2u);
            BOOST_TEST(two.holders == 2u);
            BOOST_TEST((co_await rb.obtain_semaphore("s", 2).available()) == 0u);
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

BOOST_AUTO_TEST_CASE(the_tool_counts_permits)
{
    rw::the_tool_counts_permits(DLOCK_CLI_PATH, shared->url());
    BOOST_TEST(left_nothing({"dlock:pool"}));
}

BOOST_AUTO_TEST_SUITE_END()
