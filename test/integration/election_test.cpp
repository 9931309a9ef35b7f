// SPDX-License-Identifier: BSL-1.0
// Leader election on a real redis-server: the scenarios every store with elections runs
// (integration/election_scenarios.hpp, with campaigning worker processes), and a store
// without elections answering not_supported.
#include <dlock/dlock.hpp>
#include <dlock/redis/store.hpp>

#include "common/child.hpp"
#include "common/redis_server.hpp"
#include "integration/election_scenarios.hpp"
#include "integration/lock_test_util.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <stdlib.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

using boost::system::error_code;
using dlock::test::child;
using dlock::test::redis_server;
using dlock::test::run_test;
using dlock::test::spawn;

namespace {

namespace scenarios = dlock::test::election_scenarios;

scenarios::store_factory redis_of(const redis_server& srv)
{
    return
        [&srv](asio::io_context& io) { return std::make_unique<dlock::redis_store>(io.get_executor(), srv.config()); };
}

}  // namespace

BOOST_AUTO_TEST_SUITE(election_suite)

BOOST_AUTO_TEST_CASE(one_leader_at_a_time_by_the_leaders_own_account)
{
    redis_server srv;
    scenarios::one_leader_at_a_time_by_the_leaders_own_account(std::to_string(srv.port()));
}

BOOST_AUTO_TEST_CASE(failover_after_the_leader_is_killed_and_observers_see_no_leader)
{
    redis_server srv;
    scenarios::failover_after_the_leader_is_killed_and_observers_see_no_leader(std::to_string(srv.port()),
                                                                               redis_of(srv));
}

BOOST_AUTO_TEST_CASE(a_paused_leader_learns_on_resume_that_it_lost_with_a_lower_term)
{
    redis_server srv;
    scenarios::a_paused_leader_learns_on_resume_that_it_lost_with_a_lower_term(std::to_string(srv.port()),
                                                                               redis_of(srv));
}

BOOST_AUTO_TEST_CASE(a_rejoining_candidate_leads_again_after_its_term_is_taken)
{
    redis_server srv;
    asio::io_context io;
    dlock::redis_store st(io.get_executor(), srv.config());
    dlock::registry reg(st, {.lease = 1s});
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            co_await scenarios::a_rejoining_candidate_leads_again_after_its_term_is_taken(st, reg);
            st.close();
        },
        30s);
}

BOOST_AUTO_TEST_CASE(other_stores_answer_not_supported)
{
    redis_server srv;
    asio::io_context io;
    dlock::redis_store noscript(io.get_executor(), srv.config(), dlock::redis_store_options{.scripting = false});
    dlock::registry reg(noscript);
    bool ran = false;
    spawn(io, [&]() -> asio::awaitable<void> {
        dlock::election e(reg, "x");
        auto [ec, l] = co_await e.campaign("v", asio::as_tuple(asio::use_awaitable));
        BOOST_TEST(ec == dlock::error::not_supported);
        auto [ec2, info] = co_await e.leader(asio::as_tuple(asio::use_awaitable));
        BOOST_TEST(ec2 == dlock::error::not_supported);
        auto obs = e.observe();
        auto [ec3, i3] = co_await obs.async_next(asio::as_tuple(asio::use_awaitable));
        BOOST_TEST(ec3 == dlock::error::not_supported);
        co_await reg.async_drain(asio::use_awaitable);  // the campaign's lease given back
        BOOST_TEST(srv.cli({"EXISTS", noscript.lock_key("dlock:x")}) == "0");
        ran = true;
        noscript.close();
    });
    io.run_for(10s);
    BOOST_TEST(ran);
}

BOOST_AUTO_TEST_SUITE_END()
