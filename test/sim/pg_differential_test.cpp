// SPDX-License-Identifier: BSL-1.0
// The PostgreSQL model against a real server: the same random sequence of acquires (queued
// or not), renewals and releases of a few tokens goes to postgres_store (its statements) and
// to pg_model; every answer, every fencing token (one sequence draws fences and queue places
// in both) and the holder after each step must agree, hand-offs included.
#include <dlock/postgres.hpp>

#include "common/postgres_server.hpp"
#include "pg_model.hpp"
#include "settle.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <map>
#include <random>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using dlock::sim::real_time;

BOOST_AUTO_TEST_SUITE(simulation_pg_differential)

BOOST_AUTO_TEST_CASE(the_model_answers_as_the_statements_do)
{
    dlock::test::postgres_server srv;
    asio::io_context io;
    auto cfg = srv.config();
    cfg.table = "sim_diff";  // a table (and sequence) of its own: fences start at 1
    dlock::postgres_store st(io.get_executor(), cfg);
    dlock::sim::pg_model model;
    model.listen(1);  // the store's listener backend
    const std::string name = "diff";
    const std::vector<std::string> tokens{"t0", "t1", "t2", "t3"};
    const auto ttl = 60s;  // no lease runs out during the test: the model's time stands still
    real_time now{1'000'000};
    int ready = 0, steps = 0, handoffs = 0;
    // Every token watches, as a waiting lock does: a queued token names the listening backend.
    std::vector<dlock::store::watch_id> ids;
    for (const auto& tok : tokens)
        ids.push_back(st.watch(name, tok, [&](dlock::watch_event ev, const dlock::grant_notice&) {
            if (ev == dlock::watch_event::ready)
                ++ready;
        }));
    model.on_grant = [&](const std::string&, std::uint64_t, std::chrono::milliseconds) { ++handoffs; };
    std::exception_ptr failure;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            {
                std::function<bool()> done = [&] { return ready >= int(tokens.size()); };
                co_await dlock::sim::settle(done);
            }
            BOOST_TEST_REQUIRE(ready == int(tokens.size()));
            std::mt19937 rng(20261128);
            for (int i = 0; i < 300; ++i) {
                const auto& tok = tokens[rng() % tokens.size()];
                now += std::chrono::milliseconds(1);
                switch (rng() % 4) {
                case 0:
                case 1: {
                    bool queue = rng() % 2 == 0;
                    dlock::lease_request req{name, tok, ttl, dlock::lease_kind::mutex, 1, queue};
                    auto real = co_await st.async_try_acquire(req, asio::use_awaitable);
                    auto mine = model.acquire(tok, ttl, queue ? 1 : 0, now);
                    BOOST_TEST(real.acquired == mine.acquired, "step " << i << ": acquire " << tok);
                    if (real.acquired && mine.acquired)
                        BOOST_TEST(real.fencing_token == mine.fencing_token, "step " << i);
                    break;
                }
                case 2: {
                    dlock::lease_key k{name, tok};
                    auto real = co_await st.async_renew(k, ttl, asio::use_awaitable);
                    auto mine = model.renew(tok, ttl, now);
                    BOOST_TEST(real.owned == mine.owned, "step " << i << ": renew " << tok);
                    BOOST_TEST(real.contended == mine.contended, "step " << i << ": renew " << tok);
                    break;
                }
                default: {
                    dlock::lease_key k{name, tok};
                    bool real = co_await st.async_release(k, asio::use_awaitable);
                    bool mine = model.release(tok, now).held;
                    BOOST_TEST(real == mine, "step " << i << ": release " << tok);
                }
                }
                auto s = co_await st.async_status(name, asio::use_awaitable);
                auto holder = model.holder(now);
                BOOST_TEST(s.held == holder.has_value(), "step " << i);
                BOOST_TEST(s.queued == model.queued(now), "step " << i);
                if (s.held && holder) {
                    BOOST_TEST(s.holder == *holder, "step " << i);
                    BOOST_TEST(s.fencing_token == model.fence(), "step " << i);
                }
                ++steps;
            }
            for (auto id : ids)
                st.unwatch(id);
            st.close();
        },
        [&](std::exception_ptr e) { failure = e; });
    io.run_for(120s);
    if (failure)
        std::rethrow_exception(failure);
    BOOST_TEST(steps == 300);
    BOOST_TEST(handoffs > 0);  // the sequence went through hand-offs, not only frees
}

// A holder whose lease runs out leaves the name to its waiters in the order they queued:
// the next acquire, whoever sends it, hands the name to the first live waiter (here the row's
// end is moved into the past, as time would). Before, the first to ask took it.
BOOST_AUTO_TEST_CASE(an_expired_holders_waiters_keep_their_order)
{
    dlock::test::postgres_server srv;
    asio::io_context io;
    auto cfg = srv.config();
    cfg.table = "sim_expiry";
    dlock::postgres_store st(io.get_executor(), cfg);
    dlock::sim::pg_model model;
    model.listen(1);
    const std::string name = "expiry";
    const std::vector<std::string> tokens{"h", "a", "b", "c"};
    int ready = 0;
    std::map<std::string, std::uint64_t> granted, model_granted;
    std::vector<dlock::store::watch_id> ids;
    for (const auto& tok : tokens)
        ids.push_back(st.watch(name, tok, [&, tok](dlock::watch_event ev, const dlock::grant_notice& g) {
            if (ev == dlock::watch_event::ready)
                ++ready;
            if (ev == dlock::watch_event::granted)
                granted[tok] = g.fencing_token;
        }));
    model.on_grant = [&](const std::string& tok, std::uint64_t fence, std::chrono::milliseconds) {
        model_granted[tok] = fence;
    };
    std::exception_ptr failure;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            {
                std::function<bool()> done = [&] { return ready >= int(tokens.size()); };
                co_await dlock::sim::settle(done);
            }
            BOOST_TEST_REQUIRE(ready == int(tokens.size()));
            real_time now{1'000'000};
            auto attempt = [&](const std::string& tok, bool queue) -> asio::awaitable<bool> {
                dlock::lease_request req{name, tok, 60s, dlock::lease_kind::mutex, 1, queue};
                auto real = co_await st.async_try_acquire(req, asio::use_awaitable);
                auto mine = model.acquire(tok, 60s, queue ? 1 : 0, now);
                BOOST_TEST(real.acquired == mine.acquired, tok);
                co_return real.acquired;
            };
            BOOST_TEST(co_await attempt("h", false));
            BOOST_TEST(!co_await attempt("a", true));
            BOOST_TEST(!co_await attempt("b", true));
            // h's lease runs out: its end moves into the past, and the model's time past it.
            srv.psql(
                "UPDATE sim_expiry SET expires_at = clock_timestamp() - interval '1 second' WHERE name = 'expiry'");
            now += 61s;
            BOOST_TEST(!co_await attempt("c", false));  // a try: a is handed the name first
            BOOST_TEST(!co_await attempt("b", true));   // b keeps its place behind a
            {
                std::function<bool()> done = [&] { return granted.count("a") != 0; };
                co_await dlock::sim::settle(done);
            }
            BOOST_TEST(granted.count("a") == 1);
            BOOST_TEST(model_granted.count("a") == 1);
            BOOST_TEST(granted["a"] == model_granted["a"]);
            auto s = co_await st.async_status(name, asio::use_awaitable);
            BOOST_TEST(s.holder == "a");
            BOOST_TEST(model.holder(now).value_or("") == "a");
            BOOST_TEST(s.fencing_token == model.fence());
            BOOST_TEST(s.queued == model.queued(now));
            // a releases: b, not c, is next.
            dlock::lease_key ka{name, "a"};
            BOOST_TEST(co_await st.async_release(ka, asio::use_awaitable));
            BOOST_TEST(model.release("a", now).held);
            s = co_await st.async_status(name, asio::use_awaitable);
            BOOST_TEST(s.holder == "b");
            BOOST_TEST(model.holder(now).value_or("") == "b");
            {
                std::function<bool()> done = [&] { return granted.count("b") != 0; };
                co_await dlock::sim::settle(done);  // its grant notice, on the way
            }
            for (auto id : ids)
                st.unwatch(id);
            st.close();
        },
        [&](std::exception_ptr e) { failure = e; });
    io.run_for(60s);
    if (failure)
        std::rethrow_exception(failure);
    BOOST_TEST(granted.count("b") == 1);
}

BOOST_AUTO_TEST_SUITE_END()
