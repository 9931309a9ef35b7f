// SPDX-License-Identifier: BSL-1.0
// Read-write locks, semaphores and the mutex's direct hand-off on a real three-master Redis
// Cluster: redis_store's scripts in the name's slot, grants over sharded pub/sub. The
// read-write scenarios every store runs (rw_scenarios.hpp), a semaphore never above its
// permits, a killed holder's permit back, a queued waiter handed the name by a release in
// another store, a queued writer that follows its slot to another master, and cancelled
// waiters leaving no key or shard channel on any master. One cluster for the suite.
#include <dlock/dlock.hpp>

#include "common/child.hpp"
#include "common/redis_cluster.hpp"
#include "common/scratch_dir.hpp"
#include "integration/consensus/support.hpp"
#include "integration/lock_test_util.hpp"
#include "integration/rw_scenarios.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

using boost::system::error_code;
using namespace std::chrono_literals;
using dlock::test::child;
using dlock::test::redis_cluster;
using dlock::test::spawn;
using dlock::test::worker_path;

namespace {

constexpr auto tuple = asio::as_tuple(asio::use_awaitable);

// The suite's cluster: started before its first case, stopped after its last.
std::unique_ptr<redis_cluster> shared;
struct one_cluster {
    one_cluster() { shared = std::make_unique<redis_cluster>(); }
    ~one_cluster() { shared.reset(); }
};

// lock_worker's target for a cluster_store seeded with node 0.
std::string where()
{
    return "cluster:" + std::to_string(shared->node(0).port());
}

std::string temp_dir()
{
    return dlock::test::scratch_dir("dlock-clsets");
}

// Keys matching `pattern` on every master, space-separated ("" when none).
std::string keys_everywhere(const std::string& pattern)
{
    std::string out;
    for (std::size_t i = 0; i < shared->size(); ++i) {
        auto k = shared->node(i).cli({"EVAL", "return table.concat(redis.call('KEYS', ARGV[1]), ' ')", "0", pattern});
        if (!k.empty())
            out += (out.empty() ? "" : " ") + k;
    }
    return out;
}

// Shard channels matching `pattern` subscribed on master `i`, counted.
long shard_channels_on(std::size_t i, const std::string& pattern)
{
    return std::stol(
        shared->node(i).cli({"EVAL", "return #redis.call('PUBSUB', 'SHARDCHANNELS', ARGV[1])", "0", pattern}));
}

// Shard channels subscribed on every master, counted.
long shard_channels()
{
    long n = 0;
    for (std::size_t i = 0; i < shared->size(); ++i)
        n += shard_channels_on(i, "*");
    return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cluster_sets, *boost::unit_test::fixture<one_cluster>())

// Readers share and writers exclude across processes; a writer gets in while a stream of
// readers never lets go; only fencing counters are left.
BOOST_AUTO_TEST_CASE(readers_share_writers_exclude_and_a_writer_is_not_starved)
{
    auto dir = temp_dir();
    dlock::test::rw::readers_share_writers_exclude(where(), dir + "/log");
    dlock::test::rw::a_writer_gets_in_while_readers_keep_arriving(where(), dir + "/stream");
    BOOST_TEST(keys_everywhere("*:dlock:rw*") == "");
    BOOST_TEST(keys_everywhere("*:dlock:stream*") == "");
}

// Three processes of four coroutines on a semaphore of 3: never more than 3 inside, all 3
// used, every token once.
BOOST_AUTO_TEST_CASE(a_semaphore_never_exceeds_its_permits)
{
    auto log = temp_dir() + "/log";
    std::vector<std::unique_ptr<child>> ws;
    for (int p = 0; p < 3; ++p)
        ws.push_back(dlock::test::rw::sections(where(), "sem", "permits=3", 4, 15, 5, log));
    for (auto& w : ws)
        dlock::test::expect_done(*w);
    auto r = dlock::test::read_sections_log(log);
    BOOST_TEST(r.begins == 3u * 4 * 15);
    BOOST_TEST(r.well_formed);
    BOOST_TEST(r.tokens_unique);
    BOOST_TEST(r.max_inside <= 3u, "most permits held at once: " << r.max_inside);
    BOOST_TEST(r.max_inside == 3u, "all 3 permits were in use at some point: " << r.max_inside);
    BOOST_TEST(keys_everywhere("*:dlock:sem*") == "");
}

BOOST_AUTO_TEST_CASE(a_killed_holders_permit_comes_back)
{
    asio::io_context io;
    dlock::cluster_store store(io.get_executor(), shared->seeds());
    dlock::test::rw::a_killed_holders_permit_comes_back(where(), io, store);
}

// Two stores (two processes' views): B queues at the name's master behind A; A's release
// hands B the name with a larger fencing token, and B counts it as a hand-off from another
// process (no retry of its own).
BOOST_AUTO_TEST_CASE(a_queued_waiter_is_handed_the_name)
{
    asio::io_context io;
    dlock::cluster_store a_st(io.get_executor(), shared->node(0).config());
    dlock::cluster_store b_st(io.get_executor(), shared->node(1).config());
    dlock::registry a(a_st, {.lease = 5s}), b(b_st, {.lease = 5s});
    std::uint64_t a_token = 0, b_token = 0;
    std::size_t queued = 0;
    spawn(io, [&]() -> asio::awaitable<void> {
        auto held = co_await a.obtain("h").acquire();
        a_token = held.fencing_token();
        std::optional<dlock::guard> got;
        b.obtain("h").acquire_for(10s, [&](error_code ec, dlock::guard g) {
            BOOST_TEST(!ec, ec.message());
            got = std::move(g);
        });
        auto st = co_await dlock::test::status_until(a_st, "dlock:h", [](auto& s) { return s.queued == 1; });
        queued = st.queued;
        co_await held.release();
        BOOST_TEST(co_await dlock::test::eventually([&] { return got.has_value(); }));
        if (got) {
            b_token = got->fencing_token();
            co_await got->release();
        }
        a_st.close();
        b_st.close();
    });
    io.run_for(30s);
    BOOST_TEST(queued == 1u);
    BOOST_TEST(b_token > a_token);
    BOOST_TEST(b.stats().store_handoffs == 1u);
    BOOST_TEST(keys_everywhere("*:dlock:h") == "");
}

// A writer queued behind a reader while the name's slot migrates to another master: its
// grant channel moves with the slot, and the reader's release there grants it.
BOOST_AUTO_TEST_CASE(a_queued_writer_follows_its_slot_to_another_master)
{
    asio::io_context io;
    dlock::cluster_options opts;
    opts.tryagain_delay = 5ms;
    dlock::cluster_store a_st(io.get_executor(), shared->seeds(), "dlock", opts);
    dlock::cluster_store b_st(io.get_executor(), shared->seeds(), "dlock", opts);
    dlock::registry a(a_st, {.lease = 10s}), b(b_st, {.lease = 10s});
    const std::string name = "moving";
    const unsigned slot = dlock::key_slot(a_st.lock_key("dlock:" + name));
    std::uint64_t r_token = 0, w_token = 0;
    std::size_t from = 0, to = 0;
    spawn(io, [&]() -> asio::awaitable<void> {
        auto r = co_await a.obtain_rw(name).read().acquire();
        r_token = r.fencing_token();
        std::optional<dlock::guard> w;
        b.obtain_rw(name).write().acquire_for(20s, [&](error_code ec, dlock::guard g) {
            BOOST_TEST(!ec, ec.message());
            w = std::move(g);
        });
        auto st = co_await dlock::test::status_until(a_st, "dlock:" + name, [](auto& s) { return s.queued == 1; });
        BOOST_TEST(st.queued == 1u);
        from = shared->owner_of(slot);
        to = (from + 1) % shared->size();
        shared->begin_migration(slot, from, to);
        shared->migrate_keys(slot, from, to);
        shared->finish_migration(slot, to);
        BOOST_TEST(!w.has_value(), "the writer got in while the reader held");
        // The writer's grant channel subscribed again where the slot now lives: the release
        // there hands it the name (no retry of its own).
        BOOST_TEST(co_await dlock::test::eventually(
            [&] { return shard_channels_on(to, "*granted:dlock:" + name + ":*") == 1; }, 15s));
        co_await r.release();
        BOOST_TEST(co_await dlock::test::eventually([&] { return w.has_value(); }, 15s));
        if (w) {
            w_token = w->fencing_token();
            co_await w->release();
        }
        a_st.close();
        b_st.close();
    });
    io.run_for(40s);
    BOOST_TEST(from != to);
    BOOST_TEST(w_token > r_token);
    BOOST_TEST(b.stats().store_handoffs == 1u);
    BOOST_TEST(shared->node(to).cli({"EXISTS", a_st.fence_key("dlock:" + name)}) == "1");
    BOOST_TEST(keys_everywhere("*:dlock:" + name) == "");
}

// Every script that deletes a key declares the migration guard (a key never written), so it
// never runs while its slot migrates: Redis would refuse a command on a key deleted earlier
// in the same script on a MIGRATING source and leave the rest undone (a release that popped
// the waiter and deleted the lock, granting nobody). Here every key is on the source, so
// without the guard the release would run there and stop half way. It waits, then fails
// with server_busy, changing nothing; an ASK to the target that answers TRYAGAIN is not
// counted as a redirection; the mutex's renewal (one key, nothing deleted) runs throughout.
BOOST_AUTO_TEST_CASE(a_migrating_slot_never_runs_half_a_script)
{
    asio::io_context io;
    dlock::cluster_options opts;
    opts.tryagain_delay = 5ms;
    dlock::cluster_store a_st(io.get_executor(), shared->seeds(), "dlock", opts);
    dlock::cluster_store b_st(io.get_executor(), shared->seeds(), "dlock", opts);
    opts.tryagain_limit = 200ms;
    opts.max_redirects = 1;
    dlock::cluster_store quick(io.get_executor(), shared->seeds(), "dlock", opts);
    dlock::registry b(b_st, {.lease = 10s});
    const std::string name = "dlock:guarded";
    const unsigned slot = dlock::key_slot(a_st.lock_key(name));
    std::size_t from = shared->owner_of(slot), to = (from + 1) % shared->size();
    auto expiry = [](const std::string& pttl) {  // a reply that is no number (a redirection) as it is
        return pttl.find_first_not_of("-0123456789\n") != std::string::npos ? pttl
               : std::stol(pttl) > 0                                        ? std::string("expires")
                                                                            : std::string("forever");
    };
    auto state = [&](std::size_t at) {
        auto& n = shared->node(at);
        auto lock = a_st.lock_key(name), queue = lock;
        queue.replace(queue.find(":lock:"), 6, ":queue:");
        // Owner, whether its lease has an expiry, queued waiters, the fencing counter.
        return n.cli({"HGET", lock, "owner"}) + "|" + expiry(n.cli({"PTTL", lock})) + "|" + n.cli({"LLEN", queue}) +
               "|" + n.cli({"GET", a_st.fence_key(name)});
    };
    std::string before, while_split, while_moved;
    error_code release_split, acquire_split, release_moved;
    bool renewed_split = false, renewed_moved = false;
    std::uint64_t a_token = 0, b_token = 0, redirect_failures = 0, asks = 0;
    spawn(io, [&]() -> asio::awaitable<void> {
        auto a = co_await a_st.async_try_acquire(name, "owner-a", 10s, asio::use_awaitable);
        BOOST_REQUIRE(a.acquired);
        a_token = a.fencing_token;
        std::optional<dlock::guard> got;
        b.obtain("guarded").acquire_for(20s, [&](error_code ec, dlock::guard g) {
            BOOST_TEST(!ec, ec.message());
            got = std::move(g);
        });
        co_await dlock::test::status_until(a_st, name, [](auto& s) { return s.queued == 1; });
        before = state(from);
        shared->begin_migration(slot, from, to);
        // Every key still on the source: TRYAGAIN there (the guard is missing).
        auto [e1, r1] = co_await quick.async_release(name, "owner-a", tuple);
        release_split = e1;
        auto [e2, r2] = co_await quick.async_try_acquire(name, "owner-c", 10s, tuple);
        acquire_split = e2;
        renewed_split = (co_await quick.async_renew(name, "owner-a", 10s, asio::use_awaitable)).owned;
        while_split = state(from);
        // Every key moved, the migration not finished: ASK from the source, TRYAGAIN from the
        // target, until tryagain_limit; never a redirection failure after max_redirects.
        BOOST_TEST(shared->migrate_keys(slot, from, to) >= 4u);
        auto asked = quick.stats().ask;
        auto [e3, r3] = co_await quick.async_release(name, "owner-a", tuple);
        release_moved = e3;
        asks = quick.stats().ask - asked;
        renewed_moved = (co_await quick.async_renew(name, "owner-a", 10s, asio::use_awaitable)).owned;
        redirect_failures = quick.stats().redirect_failures;
        shared->finish_migration(slot, to);
        while_moved = state(to);  // read once the target owns the slot (it answers MOVED before)
        BOOST_TEST(!got.has_value(), "the waiter got in while owner-a held");
        BOOST_TEST((co_await a_st.async_release(name, "owner-a", asio::use_awaitable)));
        BOOST_TEST(co_await dlock::test::eventually([&] { return got.has_value(); }, 15s));
        if (got) {
            b_token = got->fencing_token();
            co_await got->release();
        }
        co_await b.async_drain();
        a_st.close();
        b_st.close();
        quick.close();
    });
    io.run_for(60s);
    BOOST_TEST(from != to);
    BOOST_TEST(before.rfind("owner-a|", 0) == 0, before);
    BOOST_TEST((release_split == dlock::error::server_busy), release_split.message());
    BOOST_TEST((acquire_split == dlock::error::server_busy), acquire_split.message());
    BOOST_TEST((release_moved == dlock::error::server_busy), release_moved.message());
    BOOST_TEST(renewed_split);
    BOOST_TEST(renewed_moved);
    BOOST_TEST(while_split == before);  // nothing popped, deleted or drawn
    BOOST_TEST(while_moved == before);
    BOOST_TEST(asks >= 2u);               // the source's ASK again after each TRYAGAIN of the target's
    BOOST_TEST(redirect_failures == 3u);  // the three operations that waited out tryagain_limit
    BOOST_TEST(b_token > a_token);
    BOOST_TEST(keys_everywhere("*:" + name) == "");
}

// A reader and a permit waiter queue at the store and are cancelled: nothing of theirs is
// left, neither keys nor shard channels, on any master; kinds are checked as on one node.
BOOST_AUTO_TEST_CASE(cancelled_waiters_leave_nothing_behind)
{
    asio::io_context io;
    dlock::cluster_store store(io.get_executor(), shared->seeds());
    dlock::registry holder_reg(store, {.lease = 5s});
    dlock::registry waiter_reg(store, {.lease = 5s});  // another registry: another process's view
    std::size_t queued_while_waiting = 0;
    error_code ec_r, ec_p, as_rw, as_mutex;
    spawn(io, [&]() -> asio::awaitable<void> {
        auto w = co_await holder_reg.obtain_rw("c").write().acquire();
        auto p = co_await holder_reg.obtain_semaphore("s", 1).acquire();
        asio::cancellation_signal stop_r, stop_p;
        int ended = 0;
        waiter_reg.obtain_rw("c").read().acquire(
            asio::bind_cancellation_slot(stop_r.slot(), [&](error_code ec, dlock::guard) {
                ec_r = ec;
                ++ended;
            }));
        waiter_reg.obtain_semaphore("s", 1).acquire(
            asio::bind_cancellation_slot(stop_p.slot(), [&](error_code ec, dlock::guard) {
                ec_p = ec;
                ++ended;
            }));
        auto st = co_await dlock::test::status_until(store, "dlock:c", [](auto& s) { return s.queued == 1; });
        queued_while_waiting = st.queued;
        BOOST_TEST(st.writer);
        BOOST_TEST(co_await dlock::test::eventually([&] { return keys_everywhere("*squeue:dlock:s") != ""; }));
        stop_r.emit(asio::cancellation_type::terminal);
        stop_p.emit(asio::cancellation_type::terminal);
        BOOST_TEST(co_await dlock::test::eventually([&] { return ended == 2; }));
        // Unsubscribed by the cancellations themselves, with the store still open.
        BOOST_TEST(co_await dlock::test::eventually([&] { return shard_channels() == 0; }));
        co_await waiter_reg.obtain_rw("s").read().try_acquire(asio::redirect_error(asio::use_awaitable, as_rw));
        co_await waiter_reg.obtain("c").try_acquire(asio::redirect_error(asio::use_awaitable, as_mutex));
        co_await w.release();
        co_await p.release();
        co_await waiter_reg.async_drain();
        co_await holder_reg.async_drain();
        store.close();
    });
    io.run_for(30s);
    BOOST_TEST(queued_while_waiting == 1u);
    BOOST_TEST(ec_r == asio::error::operation_aborted);
    BOOST_TEST(ec_p == asio::error::operation_aborted);
    BOOST_TEST(as_rw == dlock::error::kind_mismatch);
    BOOST_TEST(as_mutex == dlock::error::kind_mismatch);
    BOOST_TEST(keys_everywhere("*:dlock:c") == "");
    BOOST_TEST(keys_everywhere("*:dlock:s") == "");
    BOOST_TEST(shard_channels() == 0);
}

BOOST_AUTO_TEST_SUITE_END()
