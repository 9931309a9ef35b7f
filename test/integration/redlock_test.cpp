// SPDX-License-Identifier: BSL-1.0
// The Redlock store against three real redis-server processes: the store contract, nodes
// down, fencing tokens across node restarts, and mutual exclusion across processes.
#include <dlock/dlock.hpp>

#include "common/child.hpp"
#include "common/redis_server.hpp"
#include "common/scratch_dir.hpp"
#include "integration/lock_test_util.hpp"
#include "integration/mutual_exclusion.hpp"
#include "integration/store_contract.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using boost::system::error_code;
using clock_type = std::chrono::steady_clock;
using dlock::test::eventually;
using std::chrono::milliseconds;

namespace {

struct cluster {
    explicit cluster(std::size_t n = 3, dlock::test::server_options opts = {})
    {
        for (std::size_t i = 0; i < n; ++i)
            servers.push_back(std::make_unique<dlock::test::redis_server>(opts));
    }
    std::vector<dlock::redis::config> configs() const
    {
        std::vector<dlock::redis::config> out;
        for (auto& s : servers)
            out.push_back(s->config());
        return out;
    }
    std::string urls() const
    {
        std::string out;
        for (auto& s : servers)
            out += (out.empty() ? "" : ",") + s->url();
        return out;
    }
    std::vector<std::unique_ptr<dlock::test::redis_server>> servers;
};

// Runs `f` to completion (bounded); fails the test if it did not finish.
void run(asio::io_context& io, std::function<asio::awaitable<void>()> f, std::chrono::seconds limit = 30s)
{
    bool finished = false;
    asio::co_spawn(io, std::move(f), [&](std::exception_ptr e) {
        finished = true;
        if (e)
            std::rethrow_exception(e);
    });
    io.run_for(limit);
    BOOST_TEST(finished);
}

constexpr auto tuple = asio::as_tuple(asio::use_awaitable);

long long ms_since(clock_type::time_point t)
{
    return std::chrono::duration_cast<milliseconds>(clock_type::now() - t).count();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(redlock)

BOOST_AUTO_TEST_CASE(node_lists)
{
    std::vector<dlock::redis::config> nodes;
    dlock::redis::config_error err;
    BOOST_TEST(dlock::parse_node_list(" redis://127.0.0.1:7001, redis://127.0.0.1:7002,redis://h3:7003 ", nodes, err));
    BOOST_REQUIRE(nodes.size() == 3u);
    BOOST_TEST(nodes[1].port == 7002);
    BOOST_TEST(nodes[2].host == "h3");

    BOOST_TEST(dlock::parse_node_list(R"(["redis://a:1", {"host": "b", "port": 2}])", nodes, err));
    BOOST_REQUIRE(nodes.size() == 2u);
    BOOST_TEST(nodes[0].host == "a");
    BOOST_TEST(nodes[1].port == 2);

    // The bad element is named by position and text, its password hidden.
    BOOST_TEST(!dlock::parse_node_list("redis://a:1,redis://u:secret@b:99999", nodes, err));
    BOOST_TEST(err.code == dlock::error::invalid_port);
    BOOST_TEST(err.message.find("element 2 of 2") != std::string::npos, err.message);
    BOOST_TEST(err.message.find("redis://u:***@b:99999") != std::string::npos, err.message);
    BOOST_TEST(err.message.find("secret") == std::string::npos, err.message);
    BOOST_TEST(!dlock::parse_node_list("redis://a:1,,redis://b:2", nodes, err));
    BOOST_TEST(err.message.find("element 2 of 3 is empty") != std::string::npos, err.message);
    BOOST_TEST(!dlock::parse_node_list(R"(["redis://a:1", 7])", nodes, err));
    BOOST_TEST(err.message.find("element 2 of 2") != std::string::npos, err.message);
    BOOST_TEST(!dlock::parse_node_list(R"([{"host": "a", "prot": 1}])", nodes, err));
    BOOST_TEST(err.message.find("element 1 of 1") != std::string::npos, err.message);
    BOOST_TEST(!dlock::parse_node_list("[", nodes, err));
    BOOST_TEST(!dlock::parse_node_json(boost::json::parse("[]"), nodes, err));
    BOOST_TEST(!dlock::parse_node_list("", nodes, err));
    BOOST_TEST(nodes.size() == 2u);  // untouched by failures

    asio::io_context io;
    BOOST_CHECK_THROW(dlock::redlock_store(io.get_executor(), {}), std::invalid_argument);
}

// async_connect keeps the caller's handler in its fan-out state: it completes once, after
// every node answered (issue 29: keeping it by move assignment overflowed the stack).
BOOST_AUTO_TEST_CASE(connect_completes_once_a_quorum_answered)
{
    cluster c;
    c.servers[2]->stop();
    asio::io_context io;
    dlock::redlock_store st(io.get_executor(), c.configs());
    int completions = 0;
    error_code ec = dlock::error::not_held;
    st.async_connect([&](error_code e) {
        ++completions;
        ec = e;
        io.stop();
    });
    io.run_for(20s);
    io.restart();
    io.poll();  // whatever is ready now: no second completion
    BOOST_TEST(completions == 1);
    BOOST_TEST(!ec);
    st.close();
}

BOOST_AUTO_TEST_CASE(contract_on_three_nodes)
{
    cluster c;
    asio::io_context io;
    dlock::redlock_store st(io.get_executor(), c.configs());
    BOOST_TEST(st.size() == 3u);
    BOOST_TEST(st.quorum() == 2u);
    BOOST_TEST(st.drift(1000ms).count() == 12);
    dlock::test::run_contract(io, st, [&] { st.close(); });
    // Every node saw the leases: each one's counter was raised to the last token.
    for (auto& s : c.servers)
        BOOST_TEST(std::stoll(s->cli({"GET", st.node(0).fence_key("contract:" + std::to_string(::getpid()))})) >= 4);
}

// One node gone (killed, or stopped so its requests hang): locks are still granted, at
// the speed of the two live nodes; then the store is destroyed with requests outstanding.
BOOST_AUTO_TEST_CASE(one_node_down_still_grants)
{
    cluster c;
    asio::io_context io;
    auto st = std::make_unique<dlock::redlock_store>(io.get_executor(), c.configs(), "dlock",
                                                     dlock::redlock_options{.node_timeout = 3s});
    std::uint64_t last = 0;
    run(io, [&]() -> asio::awaitable<void> {
        auto first = co_await st->async_try_acquire("dlock:n", "warm", 5s, asio::use_awaitable);  // connects all three
        BOOST_TEST(first.acquired);
        BOOST_TEST((co_await st->async_release("dlock:n", "warm", asio::use_awaitable)));
        last = first.fencing_token;

        c.servers[2]->kill();
        for (int i = 0; i < 5; ++i) {
            auto t0 = clock_type::now();
            auto [ec, r] = co_await st->async_try_acquire("dlock:n", "k" + std::to_string(i), 5s, tuple);
            BOOST_TEST(!ec, ec.message());
            BOOST_TEST(r.acquired);
            BOOST_TEST(r.fencing_token > last);
            last = r.fencing_token;
            BOOST_TEST(ms_since(t0) < 1000, "acquire took " << ms_since(t0) << " ms");  // node_timeout is 3 s
            auto [ec2, released] = co_await st->async_release("dlock:n", "k" + std::to_string(i), tuple);
            BOOST_TEST(!ec2);
            BOOST_TEST(released);
        }
        c.servers[2]->start();
        BOOST_TEST(co_await eventually([&] { return st->node(2).connection().is_connected(); }));

        // A stopped node: its requests hang until node_timeout; nothing waits for them.
        c.servers[1]->pause();
        {
            dlock::registry reg(*st, {.lease = 5s});
            for (int i = 0; i < 3; ++i) {
                auto t0 = clock_type::now();
                auto g = co_await reg.obtain("n").acquire_for(2s);
                BOOST_TEST(g.owns_lock());
                BOOST_TEST(g.fencing_token() > last);
                last = g.fencing_token();
                co_await g.release();
                BOOST_TEST(ms_since(t0) < 1000, "lock cycle took " << ms_since(t0) << " ms");
            }
        }
        auto s = co_await st->async_status("dlock:n", asio::use_awaitable);  // waits for node 1's timeout
        BOOST_TEST(!s.held);
        BOOST_TEST(s.last_fencing_token >= last);
        // Requests to the stopped node are outstanding: destroying the store now must be safe.
        bool done = false;
        st->async_try_acquire("dlock:n", "orphan", 5s, [&](error_code ec, dlock::acquire_result r) {
            done = true;
            BOOST_TEST(!r.acquired);
            BOOST_TEST(ec == dlock::error::closed);
        });
        st.reset();
        BOOST_TEST(co_await eventually([&] { return done; }));
    });
    c.servers[1]->resume();
}

// Two of three nodes gone: no quorum, a clear error, never a grant; back when they are.
BOOST_AUTO_TEST_CASE(two_nodes_down_no_quorum)
{
    cluster c;
    asio::io_context io;
    dlock::redlock_store st(io.get_executor(), c.configs(), "dlock", {.node_timeout = 300ms});
    dlock::registry reg(st, {.lease = 5s, .backoff_max = 100ms});
    run(io, [&]() -> asio::awaitable<void> {
        auto warm = co_await st.async_try_acquire("dlock:q", "warm", 5s, asio::use_awaitable);
        BOOST_TEST(warm.acquired);
        co_await st.async_release("dlock:q", "warm", asio::use_awaitable);

        c.servers[0]->kill();
        c.servers[2]->kill();
        auto t0 = clock_type::now();
        auto [ec, r] = co_await st.async_try_acquire("dlock:q", "a", 5s, tuple);
        BOOST_TEST((ec == dlock::error::no_quorum), ec.message());
        BOOST_TEST(!r.acquired);
        BOOST_TEST(ms_since(t0) < 1500, "failed after " << ms_since(t0) << " ms");  // about node_timeout
        // The lease the live node granted is released again.
        BOOST_TEST(co_await eventually([&] {
            return c.servers[1]->cli({"EXISTS", st.node(1).lock_key("dlock:q")}) == "0";
        }));
        auto [ec_r, rr] = co_await st.async_renew("dlock:q", "a", 5s, tuple);
        BOOST_TEST((ec_r == dlock::error::no_quorum));
        BOOST_TEST(!rr.owned);
        auto [ec_s, ss] = co_await st.async_status("dlock:q", tuple);
        BOOST_TEST((ec_s == dlock::error::no_quorum));
        auto [ec_f, ff] = co_await st.async_force_release("dlock:q", tuple);
        BOOST_TEST((ec_f == dlock::error::no_quorum));
        BOOST_TEST(!ff);

        // Through the lock: never granted. One attempt reports the store's error; a bounded
        // wait retries store errors until its limit.
        auto [ec_t, gt] = co_await reg.obtain("q").try_acquire(tuple);
        BOOST_TEST(!gt.owns_lock());
        BOOST_TEST((ec_t == dlock::error::no_quorum), ec_t.message());
        auto [ec_l, g] = co_await reg.obtain("q").acquire_for(1s, tuple);
        BOOST_TEST(!g.owns_lock());
        BOOST_TEST((ec_l == dlock::error::timeout), ec_l.message());
        BOOST_TEST(reg.stats().store_errors >= 1u);
        BOOST_TEST(reg.stats().acquired == 0u);

        // One node back: a quorum again.
        c.servers[2]->start();
        auto g2 = co_await reg.obtain("q").acquire_for(10s);
        BOOST_TEST(g2.owns_lock());
        BOOST_TEST(g2.fencing_token() > warm.fencing_token);
        co_await g2.release();
        st.close();
    });
}

// Leases held on a minority do not block; a majority held elsewhere refuses with a hint.
BOOST_AUTO_TEST_CASE(minority_and_majority_holders)
{
    cluster c;
    asio::io_context io;
    dlock::redlock_store st(io.get_executor(), c.configs());
    run(io, [&]() -> asio::awaitable<void> {
        // "x" holds node 0 only (a failed Redlock attempt's leftover): not a lock.
        BOOST_TEST((co_await st.node(0).async_try_acquire("m", "x", 3s, asio::use_awaitable)).acquired);
        auto y = co_await st.async_try_acquire("m", "y", 5s, asio::use_awaitable);
        BOOST_TEST(y.acquired);
        auto s = co_await st.async_status("m", asio::use_awaitable);
        BOOST_TEST(s.held);
        BOOST_TEST(s.holder == "y");
        BOOST_TEST(s.fencing_token == y.fencing_token);
        // The counter update recorded y's token on the nodes holding y's lease.
        BOOST_TEST(c.servers[1]->cli({"HGET", st.node(1).lock_key("m"), "fence"}) == std::to_string(y.fencing_token));
        BOOST_TEST(co_await st.async_release("m", "y", asio::use_awaitable));
        co_await st.node(0).async_force_release("m", asio::use_awaitable);

        // "x" holds nodes 0 and 1 with different TTLs: refused; the hint is when a quorum
        // frees up, i.e. the shorter of the two (node 2 is free).
        BOOST_TEST((co_await st.node(0).async_try_acquire("m", "x", 4s, asio::use_awaitable)).acquired);
        BOOST_TEST((co_await st.node(1).async_try_acquire("m", "x", 2s, asio::use_awaitable)).acquired);
        auto z = co_await st.async_try_acquire("m", "z", 5s, asio::use_awaitable);
        BOOST_TEST(!z.acquired);
        BOOST_TEST(z.holder_ttl.count() > 1500);
        BOOST_TEST(z.holder_ttl.count() <= 2000);
        // z's lease on node 2 was released; x is seen as the holder by the quorum.
        BOOST_TEST(co_await eventually([&] { return c.servers[2]->cli({"EXISTS", st.node(2).lock_key("m")}) == "0"; }));
        auto s2 = co_await st.async_status("m", asio::use_awaitable);
        BOOST_TEST(s2.held);
        BOOST_TEST(s2.holder == "x");
        BOOST_TEST(s2.ttl.count() <= 2000);  // a quorum holds it as long as its 2nd longest lease
        BOOST_TEST(s2.ttl.count() > 1000);
        BOOST_TEST((co_await st.async_force_release("m", asio::use_awaitable)));
        BOOST_TEST(!(co_await st.async_status("m", asio::use_awaitable)).held);
        st.close();
    });
}

// Counters that disagree (node 0 far ahead) and nodes restarted one at a time (with AOF):
// every lease's token is larger than the last, including leases granted without node 0
// (without the counter update those would count on from the other nodes' small values).
BOOST_AUTO_TEST_CASE(fencing_tokens_increase_across_node_restarts)
{
    dlock::test::server_options opts;
    opts.appendonly = true;
    cluster c(3, opts);
    asio::io_context io;
    dlock::redlock_store st(io.get_executor(), c.configs(), "dlock", {.node_timeout = 500ms});
    std::vector<std::uint64_t> tokens;
    run(io, [&]() -> asio::awaitable<void> {
        c.servers[0]->cli({"SET", st.node(0).fence_key("f"), "1000"});
        c.servers[2]->pause();  // the first lease is granted by nodes 0 and 1: token > 1000
        auto pre = co_await st.async_try_acquire("f", "pre", 5s, asio::use_awaitable);
        BOOST_TEST(pre.acquired);
        tokens.push_back(pre.fencing_token);
        // The counters disagreed (1001 and 1): node 1's was raised before the grant completed.
        BOOST_TEST(std::stoull(c.servers[1]->cli({"GET", st.node(1).fence_key("f")})) == pre.fencing_token);
        co_await st.async_release("f", "pre", asio::use_awaitable);
        c.servers[2]->resume();
        for (int round = 0; round < 12; ++round) {
            int victim = round % 3;
            if (round % 2 == 1)
                c.servers[victim]->kill();  // this lease is granted by the other two
            for (int i = 0; i < 3; ++i) {
                std::string token = "t" + std::to_string(round) + "-" + std::to_string(i);
                dlock::acquire_result r;
                error_code ec;
                // A node that just came back may still be reconnecting: retry errors briefly.
                for (int attempt = 0; attempt < 20; ++attempt) {
                    std::tie(ec, r) = co_await st.async_try_acquire("f", token, 5s, tuple);
                    if (!ec && r.acquired)
                        break;
                }
                BOOST_TEST(r.acquired, "round " << round << ": " << ec.message());
                tokens.push_back(r.fencing_token);
                co_await st.async_release("f", token, tuple);
            }
            if (!c.servers[victim]->running())
                c.servers[victim]->start();  // its data comes back from the AOF
        }
        // Counters in step again (one more lease, whose update reaches a node that missed the
        // last ones): a grant is then one request per node, with no counter update.
        BOOST_TEST(co_await eventually([&] {
            return st.node(0).connection().is_connected() && st.node(1).connection().is_connected() &&
                   st.node(2).connection().is_connected();
        }));
        // A release completes once a quorum has answered: a node killed just after it may
        // come back from its AOF still holding the last lease, refuse the next one, and so
        // miss its counter update. Wait until no node holds the name.
        BOOST_TEST(co_await eventually([&] {
            return std::all_of(c.servers.begin(), c.servers.end(), [&](auto& s) {
                return s->cli({"EXISTS", st.node(0).lock_key("f")}) == "0";
            });
        }));
        auto sync = co_await st.async_try_acquire("f", "sync", 5s, asio::use_awaitable);
        BOOST_TEST(sync.acquired);
        BOOST_TEST(sync.fencing_token > tokens.back());
        tokens.push_back(sync.fencing_token);
        co_await st.async_release("f", "sync", asio::use_awaitable);
        BOOST_TEST(co_await eventually([&] {
            return std::all_of(c.servers.begin(), c.servers.end(), [&](auto& s) {
                return s->cli({"GET", st.node(0).fence_key("f")}) == std::to_string(tokens.back());
            });
        }));
        std::vector<std::uint64_t> before;
        for (std::size_t i = 0; i < 3; ++i)
            before.push_back(st.node(i).connection().stats().requests);
        auto last = co_await st.async_try_acquire("f", "last", 5s, asio::use_awaitable);
        BOOST_TEST(last.acquired);
        BOOST_TEST(last.fencing_token == tokens.back() + 1);
        for (std::size_t i = 0; i < 3; ++i)
            BOOST_TEST(st.node(i).connection().stats().requests - before[i] <= 1u, "node " << i);
        st.close();
    });
    BOOST_REQUIRE(tokens.size() == 38u);
    BOOST_TEST(tokens.front() > 1000u);
    bool increasing = true;
    for (std::size_t i = 1; i < tokens.size(); ++i)
        increasing = increasing && tokens[i] > tokens[i - 1];
    BOOST_TEST(increasing);
}

// The documented limit: a majority of nodes restarted without their data can give a
// token that goes back.
BOOST_AUTO_TEST_CASE(fencing_limit_majority_without_persistence)
{
    cluster c;  // no AOF, no RDB
    asio::io_context io;
    dlock::redlock_store st(io.get_executor(), c.configs(), "dlock", {.node_timeout = 500ms});
    std::uint64_t before = 0, after = 0;
    run(io, [&]() -> asio::awaitable<void> {
        for (int i = 0; i < 5; ++i) {
            auto r = co_await st.async_try_acquire("lim", "b" + std::to_string(i), 5s, asio::use_awaitable);
            before = r.fencing_token;
            co_await st.async_release("lim", "b" + std::to_string(i), asio::use_awaitable);
        }
        c.servers[0]->kill();  // node 0 keeps its counter but is down for the next lease
        c.servers[1]->restart();
        c.servers[2]->restart();  // both lost everything
        // Reconnected (read-only probes: a failed acquire attempt would count on the nodes).
        for (std::size_t i : {1u, 2u}) {
            error_code ec = dlock::error::closed;
            for (int attempt = 0; attempt < 50 && ec; ++attempt)
                ec = std::get<0>(co_await st.node(i).async_status("lim", tuple));
            BOOST_TEST(!ec);
        }
        auto r = co_await st.async_try_acquire("lim", "a", 5s, asio::use_awaitable);
        BOOST_TEST(r.acquired);
        after = r.fencing_token;
        st.close();
    });
    BOOST_TEST(before == 5u);
    BOOST_TEST(after < before);  // the guarantee does not survive this, as documented
}

// watch: ready once a quorum listens (one node down), a release heard from any node wakes
// a waiter, and the registry's waiter is woken by notification rather than its timer.
BOOST_AUTO_TEST_CASE(watch_with_a_node_down)
{
    cluster c;
    c.servers[0]->kill();
    asio::io_context io;
    dlock::redlock_store st(io.get_executor(), c.configs(), "dlock", {.node_timeout = 500ms});
    dlock::redlock_store other(io.get_executor(), c.configs(), "dlock", {.node_timeout = 500ms});
    dlock::registry a(st, {.lease = 20s});
    dlock::registry b(other, {.lease = 20s});
    std::vector<dlock::watch_event> events;
    run(io, [&]() -> asio::awaitable<void> {
        auto id = st.watch("dlock:w", [&](dlock::watch_event ev) { events.push_back(ev); });
        BOOST_TEST(co_await eventually([&] { return !events.empty(); }));
        BOOST_TEST((events.front() == dlock::watch_event::ready));
        auto g = co_await a.obtain("w").acquire();
        clock_type::time_point released_at{};
        bool b_done = false;
        asio::co_spawn(
            io,
            [&]() -> asio::awaitable<void> {
                auto gb = co_await b.obtain("w").acquire_for(10s);
                BOOST_TEST(gb.owns_lock());
                BOOST_TEST(gb.fencing_token() > g.fencing_token());
                BOOST_TEST(ms_since(released_at) < 2000);  // not the 20 s lease
                co_await gb.release();
                b_done = true;
            },
            [](std::exception_ptr e) {
                if (e)
                    std::rethrow_exception(e);
            });
        // b's second refusal is its retry after `ready`: from then on it waits for a release.
        BOOST_TEST(co_await eventually([&] { return b.stats().contended >= 2u; }));
        released_at = clock_type::now();
        co_await g.release();
        BOOST_TEST(co_await eventually([&] { return b_done; }));
        BOOST_TEST(b.stats().woken_by_notification >= 1u);
        BOOST_TEST(std::count(events.begin(), events.end(), dlock::watch_event::released) >= 1);
        BOOST_TEST(std::count(events.begin(), events.end(), dlock::watch_event::ready) == 1);
        // The dead node comes back: its late subscription is no second `ready`.
        c.servers[0]->start();
        BOOST_TEST(
            co_await eventually([&] { return st.node(0).subscriber().is_subscribed(st.node(0).channel("dlock:w")); }));
        auto sync = co_await st.async_status("dlock:w", asio::use_awaitable);  // one more round trip
        BOOST_TEST(!sync.held);
        BOOST_TEST(std::count(events.begin(), events.end(), dlock::watch_event::ready) == 1);
        st.unwatch(id);
        st.close();
        other.close();
    });
}

// A cancelled try_acquire completes at once; a lease it obtained meanwhile is released.
BOOST_AUTO_TEST_CASE(cancelled_try_acquire_leaves_nothing)
{
    cluster c;
    asio::io_context io;
    dlock::redlock_store st(io.get_executor(), c.configs());
    run(io, [&]() -> asio::awaitable<void> {
        co_await st.async_status("cx", asio::use_awaitable);  // connect first
        asio::cancellation_signal sig;
        bool done = false;
        error_code got;
        st.async_try_acquire("cx", "gone", 5s,
                             asio::bind_cancellation_slot(sig.slot(), [&](error_code ec, dlock::acquire_result r) {
                                 done = true;
                                 got = ec;
                                 BOOST_TEST(!r.acquired);
                             }));
        sig.emit(asio::cancellation_type::terminal);
        BOOST_TEST(!done);  // never inside emit()
        BOOST_TEST(co_await eventually([&] { return done; }));
        BOOST_TEST((got == asio::error::operation_aborted));
        BOOST_TEST(co_await eventually([&] {
            for (std::size_t i = 0; i < 3; ++i)
                if (c.servers[i]->cli({"EXISTS", st.node(i).lock_key("cx")}) != "0")
                    return false;
            return true;
        }));
        auto s = co_await st.async_try_acquire("cx", "next", 5s, asio::use_awaitable);
        BOOST_TEST(s.acquired);
        st.close();
    });
}

BOOST_AUTO_TEST_CASE(mutual_exclusion_across_processes)
{
    cluster c;
    const std::string dir = dlock::test::scratch_dir("dlock-rl");
    auto r = dlock::test::run_count_workers(c.urls(), "rmx", 3, 10, 40, dir, 60s);  // 1,200 sections
    // Turns pass between processes (a count, not a rate: under load a process keeps the lock longer).
    BOOST_TEST(r.switches > 3u, "process switches: " << r.switches);
}

BOOST_AUTO_TEST_SUITE_END()
