// SPDX-License-Identifier: BSL-1.0
// The MariaDB model against a real server: the same random sequence of acquires, renewals
// and releases of a few tokens goes to mariadb_store (its statements, on one connection) and
// to maria_model; every answer, every fencing token (drawn only for a name newly ours) and
// the holder after each step must agree.
#include <dlock/mariadb.hpp>

#include "common/mariadb_server.hpp"
#include "maria_model.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <random>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using dlock::sim::real_time;

BOOST_AUTO_TEST_SUITE(simulation_maria_differential)

BOOST_AUTO_TEST_CASE(the_model_answers_as_the_statements_do)
{
    dlock::test::mariadb_server srv;
    asio::io_context io;
    auto cfg = srv.config();
    cfg.table = "sim_diff";  // a table (and sequence) of its own: fences start at 1
    dlock::mariadb_store st(io.get_executor(), cfg);
    dlock::sim::world w(1);
    dlock::sim::maria_model model(w);
    const int conn = 1;  // the store's one main connection
    const std::string name = "diff";
    const std::vector<std::string> tokens{"t0", "t1", "t2", "t3"};
    const auto ttl = 60s;  // no lease runs out during the test: the model's time stands still
    real_time now{1'000'000};
    int steps = 0, taken = 0;
    std::exception_ptr failure;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            std::mt19937 rng(20261128);
            for (int i = 0; i < 300; ++i) {
                const auto& tok = tokens[rng() % tokens.size()];
                now += std::chrono::milliseconds(1);
                switch (rng() % 4) {
                case 0:
                case 1: {
                    dlock::lease_request req{name, tok, ttl, dlock::lease_kind::mutex, 1, false};
                    auto real = co_await st.async_try_acquire(req, asio::use_awaitable);
                    auto mine = model.acquire(tok, ttl, conn, now).result;
                    BOOST_TEST(real.acquired == mine.acquired, "step " << i << ": acquire " << tok);
                    if (real.acquired && mine.acquired)
                        BOOST_TEST(real.fencing_token == mine.fencing_token, "step " << i);
                    taken += mine.acquired ? 1 : 0;
                    break;
                }
                case 2: {
                    dlock::lease_key k{name, tok};
                    auto real = co_await st.async_renew(k, ttl, asio::use_awaitable);
                    auto mine = model.renew(tok, ttl, conn, now);
                    BOOST_TEST(real.owned == mine.owned, "step " << i << ": renew " << tok);
                    BOOST_TEST(real.contended == mine.contended, "step " << i << ": renew " << tok);
                    break;
                }
                default: {
                    dlock::lease_key k{name, tok};
                    bool real = co_await st.async_release(k, asio::use_awaitable);
                    bool mine = model.release(tok, conn, now);
                    BOOST_TEST(real == mine, "step " << i << ": release " << tok);
                }
                }
                auto s = co_await st.async_status(name, asio::use_awaitable);
                auto holder = model.holder(now);
                BOOST_TEST(s.held == holder.has_value(), "step " << i);
                if (s.held && holder) {
                    BOOST_TEST(s.holder == *holder, "step " << i);
                    BOOST_TEST(s.fencing_token == model.fence(), "step " << i);
                }
                ++steps;
            }
            st.close();
        },
        [&](std::exception_ptr e) { failure = e; });
    io.run_for(120s);
    if (failure)
        std::rethrow_exception(failure);
    BOOST_TEST(steps == 300);
    BOOST_TEST(taken > 10);
}

BOOST_AUTO_TEST_SUITE_END()
