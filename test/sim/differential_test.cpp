// SPDX-License-Identifier: BSL-1.0
// The Redis model against a real redis-server: the same random sequence of acquires (queued
// or not), renewals and releases of a few tokens goes to redis_store (its real scripts) and
// to redis_model; every answer and the holder after each step must agree, hand-offs included.
#include <dlock/redis_store.hpp>

#include "common/redis_server.hpp"
#include "redis/redlock_scripts.hpp"
#include "redis_model.hpp"
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

BOOST_AUTO_TEST_SUITE(simulation_differential)

BOOST_AUTO_TEST_CASE(the_model_answers_as_the_scripts_do)
{
    dlock::test::redis_server srv;
    asio::io_context io;
    dlock::redis_store st(io.get_executor(), srv.config());
    dlock::sim::redis_model model;
    const std::string name = "diff";
    const std::vector<std::string> tokens{"t0", "t1", "t2", "t3"};
    const auto ttl = 60s;  // no lease runs out during the test: the model's time stands still
    real_time now{1'000'000};
    int ready = 0, steps = 0;
    // Every token listens on its grant channel, as a waiting lock does (a hand-off skips a
    // queued token nobody listens for).
    std::vector<dlock::store::watch_id> ids;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        ids.push_back(st.watch(name, tokens[i], [&](dlock::watch_event ev, const dlock::grant_notice&) {
            if (ev == dlock::watch_event::ready)
                ++ready;
        }));
        model.grant_subscribers(tokens[i]).insert(static_cast<int>(i));
    }
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
            for (int i = 0; i < 400; ++i) {
                const auto& tok = tokens[rng() % tokens.size()];
                now += std::chrono::milliseconds(1);
                switch (rng() % 4) {
                case 0:
                case 1: {
                    bool queue = rng() % 2 == 0;
                    dlock::lease_request req{name, tok, ttl, dlock::lease_kind::mutex, 1, queue};
                    auto real = co_await st.async_try_acquire(req, asio::use_awaitable);
                    auto mine = model.acquire(tok, ttl, queue, now);
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
                    bool mine = model.release(tok, now);
                    BOOST_TEST(real == mine, "step " << i << ": release " << tok);
                }
                }
                auto s = co_await st.async_status(name, asio::use_awaitable);
                auto holder = model.holder(now);
                BOOST_TEST(s.held == holder.has_value(), "step " << i);
                if (s.held && holder)
                    BOOST_TEST(s.holder == *holder, "step " << i);
                ++steps;
            }
            for (auto id : ids)
                st.unwatch(id);
            st.close();
        },
        [&](std::exception_ptr e) { failure = e; });
    io.run_for(60s);
    if (failure)
        std::rethrow_exception(failure);
    BOOST_TEST(steps == 400);
}

// Redlock's counter update (scripts::raise_fence), run on a real node and on the model: the
// counter only ever rises, the holder's lease takes the token, anyone else's raise holds
// nothing; the next lease's fence continues from the raised counter on both.
BOOST_AUTO_TEST_CASE(redlocks_counter_update_answers_as_the_script_does)
{
    dlock::test::redis_server srv;
    asio::io_context io;
    dlock::redis_store st(io.get_executor(), srv.config());
    dlock::sim::redis_model model({}, false);
    const std::string name = "raise";
    real_time now{1'000'000};
    auto raise = [&](std::uint64_t t, const std::string& tok) {
        auto real = srv.cli(
            {"EVAL", dlock::scripts::raise_fence, "2", st.fence_key(name), st.lock_key(name), std::to_string(t), tok});
        bool mine = model.raise_fence(t, tok, now);
        BOOST_TEST(real == (mine ? "1" : "0"), "raise " << t << " by " << tok);
        BOOST_TEST(srv.cli({"GET", st.fence_key(name)}) == std::to_string(model.counter()), "counter after " << t);
    };
    std::exception_ptr failure;
    std::vector<std::uint64_t> fences;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            auto take = [&](const std::string& tok) -> asio::awaitable<void> {
                dlock::lease_request req{name, tok, 60s, dlock::lease_kind::mutex, 1, false};
                auto real = co_await st.async_try_acquire(req, asio::use_awaitable);
                auto mine = model.acquire(tok, 60s, false, now);
                BOOST_TEST(real.acquired == mine.acquired, tok);
                BOOST_TEST(real.fencing_token == mine.fencing_token, tok);
                fences.push_back(real.fencing_token);
            };
            auto status = [&]() -> asio::awaitable<void> {
                auto s = co_await st.async_status(name, asio::use_awaitable);
                BOOST_TEST(s.held == model.holder(now).has_value());
                BOOST_TEST(s.last_fencing_token == std::stoull(srv.cli({"GET", st.fence_key(name)})));
            };
            co_await take("a");
            raise(10, "a");  // the holder's lease takes 10, the counter rises to 10
            raise(7, "a");   // the counter stays; the lease records 7, as the script does
            raise(12, "b");  // not b's: only the counter rises
            co_await status();
            dlock::lease_key ka{name, "a"};
            BOOST_TEST(co_await st.async_release(ka, asio::use_awaitable));
            BOOST_TEST(model.release("a", now));
            co_await take("c");  // continues from 12 on both
            co_await status();
            st.close();
        },
        [&](std::exception_ptr e) { failure = e; });
    io.run_for(30s);
    if (failure)
        std::rethrow_exception(failure);
    BOOST_TEST(fences.size() == 2u);
    BOOST_TEST(fences.back() == 13u);
}

// A holder whose lease runs out leaves the name to its waiters in the order they queued:
// the next attempt, whoever makes it, hands the name to the first live waiter (here the key
// is deleted, as its expiry would). Before, the first to ask took it.
BOOST_AUTO_TEST_CASE(an_expired_holders_waiters_keep_their_order)
{
    dlock::test::redis_server srv;
    asio::io_context io;
    dlock::redis_store st(io.get_executor(), srv.config());
    dlock::sim::redis_model model;
    const std::string name = "expiry";
    const std::vector<std::string> tokens{"h", "a", "b", "c"};
    int ready = 0;
    std::map<std::string, std::uint64_t> granted;
    std::vector<dlock::store::watch_id> ids;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        auto tok = tokens[i];
        ids.push_back(st.watch(name, tok, [&, tok](dlock::watch_event ev, const dlock::grant_notice& g) {
            if (ev == dlock::watch_event::ready)
                ++ready;
            if (ev == dlock::watch_event::granted)
                granted[tok] = g.fencing_token;
        }));
        model.grant_subscribers(tok).insert(static_cast<int>(i));
    }
    std::map<std::string, std::uint64_t> model_granted;
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
                auto mine = model.acquire(tok, 60s, queue, now);
                BOOST_TEST(real.acquired == mine.acquired, tok);
                co_return real.acquired;
            };
            BOOST_TEST(co_await attempt("h", false));
            BOOST_TEST(!co_await attempt("a", true));
            BOOST_TEST(!co_await attempt("b", true));
            // h's lease runs out: the key goes, and the model's time passes its end.
            srv.cli({"DEL", st.lock_key(name)});
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
            BOOST_TEST(s.queued == 1u);  // b
            // a releases: b, not c, is next.
            dlock::lease_key ka{name, "a"};
            BOOST_TEST(co_await st.async_release(ka, asio::use_awaitable));
            BOOST_TEST(model.release("a", now));
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
