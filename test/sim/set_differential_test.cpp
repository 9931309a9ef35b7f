// SPDX-License-Identifier: BSL-1.0
// The Redis model's sets against a real redis-server: a read-write lock's and a semaphore's
// scripts (src/redis/set_scripts.hpp) and the lease-set protocol the model runs
// (core/lease_set) get the same random acquires (queued or not), renewals and releases;
// every answer, the set's holders, writer and highest fence after each step, and every
// grant handed to a queued waiter must agree.
#include <dlock/redis_store.hpp>

#include "common/redis_server.hpp"
#include "redis_model.hpp"
#include "settle.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <random>
#include <utility>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using dlock::lease_kind;
using dlock::sim::real_time;

namespace {

using grants = std::vector<std::pair<std::string, std::uint64_t>>;

// `kinds[i]` is token i's lease kind; `permits` a semaphore's (0: a read-write lock).
void run_sequence(const std::string& name, const std::vector<lease_kind>& kinds, unsigned permits, int steps,
                  std::uint32_t seed)
{
    dlock::test::redis_server srv;
    asio::io_context io;
    dlock::redis_store st(io.get_executor(), srv.config());
    dlock::sim::redis_model model;
    model.serve_as_set(permits ? lease_kind::permit : lease_kind::read, permits);
    const auto ttl = 60s;  // no lease runs out during the test: the model's time stands still
    std::vector<std::string> tokens;
    for (std::size_t i = 0; i < kinds.size(); ++i)
        tokens.push_back("t" + std::to_string(i));
    int ready = 0, done_steps = 0;
    grants real_grants, model_grants;
    std::vector<dlock::store::watch_id> ids;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        auto tok = tokens[i];
        ids.push_back(st.watch(name, tok, [&, tok](dlock::watch_event ev, const dlock::grant_notice& g) {
            if (ev == dlock::watch_event::ready)
                ++ready;
            if (ev == dlock::watch_event::granted)
                real_grants.emplace_back(tok, g.fencing_token);
        }));
        model.grant_subscribers(tok).insert(static_cast<int>(i));
    }
    model.on_grant = [&](const std::string& tok, std::uint64_t fence, std::chrono::milliseconds) {
        model_grants.emplace_back(tok, fence);
    };
    std::exception_ptr failure;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            {
                std::function<bool()> all_ready = [&] { return ready >= int(tokens.size()); };
                co_await dlock::sim::settle(all_ready);
            }
            BOOST_TEST_REQUIRE(ready == int(tokens.size()));
            std::mt19937 rng(seed);
            real_time now{1'000'000};
            for (int i = 0; i < steps; ++i) {
                auto t = rng() % tokens.size();
                const auto& tok = tokens[t];
                now += std::chrono::milliseconds(1);
                switch (rng() % 4) {
                case 0:
                case 1: {
                    bool queue = rng() % 2 == 0;
                    dlock::lease_request req{name, tok, ttl, kinds[t], permits ? permits : 1, queue};
                    auto real = co_await st.async_try_acquire(req, asio::use_awaitable);
                    auto mine = model.acquire(tok, ttl, queue, now, kinds[t]);
                    BOOST_TEST(real.acquired == mine.acquired, "step " << i << ": acquire " << tok);
                    if (real.acquired && mine.acquired)
                        BOOST_TEST(real.fencing_token == mine.fencing_token, "step " << i);
                    break;
                }
                case 2: {
                    dlock::lease_key k{name, tok, {}, kinds[t]};
                    auto real = co_await st.async_renew(k, ttl, asio::use_awaitable);
                    auto mine = model.renew(tok, ttl, now);
                    BOOST_TEST(real.owned == mine.owned, "step " << i << ": renew " << tok);
                    BOOST_TEST(real.contended == mine.contended,
                               "step " << i << ": renew " << tok << " real " << real.contended);
                    break;
                }
                default: {
                    dlock::lease_key k{name, tok, {}, kinds[t]};
                    bool real = co_await st.async_release(k, asio::use_awaitable);
                    bool mine = model.release(tok, now);
                    BOOST_TEST(real == mine, "step " << i << ": release " << tok);
                }
                }
                auto s = co_await st.async_status(name, asio::use_awaitable);
                auto m = model.set_status(now);
                BOOST_TEST(s.holders == m.holders, "step " << i);
                BOOST_TEST(s.writer == m.writer, "step " << i);
                BOOST_TEST(s.fencing_token == m.fencing_token, "step " << i);
                BOOST_TEST(s.queued == m.queued, "step " << i);
                ++done_steps;
            }
            // The grants published to queued waiters, in order, on both.
            std::function<bool()> heard = [&] { return real_grants.size() >= model_grants.size(); };
            co_await dlock::sim::settle(heard);
            BOOST_TEST(real_grants == model_grants);
            BOOST_TEST(!model_grants.empty());  // the sequence handed the set to a waiter
            for (auto id : ids)
                st.unwatch(id);
            st.close();
        },
        [&](std::exception_ptr e) { failure = e; });
    io.run_for(60s);
    if (failure)
        std::rethrow_exception(failure);
    BOOST_TEST(done_steps == steps);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(simulation_differential)

BOOST_AUTO_TEST_CASE(a_read_write_locks_model_answers_as_its_scripts_do)
{
    run_sequence("rw", {lease_kind::write, lease_kind::read, lease_kind::read, lease_kind::write, lease_kind::read}, 0,
                 400, 20261128);
}

BOOST_AUTO_TEST_CASE(a_semaphores_model_answers_as_its_scripts_do)
{
    run_sequence("sem", std::vector<lease_kind>(5, lease_kind::permit), 2, 400, 20261129);
}

BOOST_AUTO_TEST_SUITE_END()
