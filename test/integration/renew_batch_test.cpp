// SPDX-License-Identifier: BSL-1.0
// Renewals batched (issue 16): redis_store sends the renewals asked in one turn as one
// script call, and the watchdog aligns renewal times so that many leases renew in one turn.
// Each lease's answer is still its own: not ours, a key of another type, or renewed.
#include <dlock/dlock.hpp>
#include <dlock/redis/store.hpp>

#include "common/redis_server.hpp"
#include "integration/support.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdlib>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using dlock::test::redis_server;
using dlock::test::run_test;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// Script calls the server has run (EVAL and EVALSHA), from INFO commandstats.
long long script_calls(const redis_server& srv)
{
    auto text = srv.cli({"INFO", "commandstats"});
    long long n = 0;
    for (std::string cmd : {"cmdstat_evalsha:calls=", "cmdstat_eval:calls="})
        if (auto at = text.find(cmd); at != std::string::npos)
            n += std::atoll(text.c_str() + at + cmd.size());
    return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(renew_batch)

BOOST_AUTO_TEST_CASE(renewals_of_one_turn_go_as_one_call_each_with_its_own_answer)
{
    redis_server srv;
    asio::io_context io;
    dlock::redis_store st(io.get_executor(), srv.config());
    constexpr int leases = 300;  // more than one call's 256
    run_test(io, [&]() -> asio::awaitable<void> {
        for (int i = 0; i < leases; ++i) {
            auto [ec, r] =
                co_await st.async_try_acquire("b" + std::to_string(i), "t" + std::to_string(i), 5s, use_tuple);
            BOOST_TEST_REQUIRE((!ec && r.acquired));
        }
        // Lease 7 is another type now (a user's write), lease 9 is asked with a wrong token.
        srv.cli({"DEL", st.lock_key("b7")});
        srv.cli({"LPUSH", st.lock_key("b7"), "x"});
        auto before = script_calls(srv);
        std::vector<std::pair<boost::system::error_code, dlock::renew_result>> got(leases);
        int answered = 0;
        dlock::test::notifier done(io.get_executor());
        for (int i = 0; i < leases; ++i) {
            auto token = i == 9 ? std::string("not-mine") : "t" + std::to_string(i);
            st.async_renew("b" + std::to_string(i), token, 7s,
                           [&, i](boost::system::error_code ec, dlock::renew_result r) {
                               got[std::size_t(i)] = {ec, r};
                               ++answered;
                               done.notify();
                           });
        }
        BOOST_TEST_REQUIRE((co_await done.wait([&] { return answered == leases; })));
        BOOST_TEST(script_calls(srv) - before == 2);  // 256 + 44
        for (int i = 0; i < leases; ++i) {
            auto [ec, r] = got[std::size_t(i)];
            if (i == 7) {
                BOOST_TEST(ec == dlock::error::wrong_type);
                BOOST_TEST(st.last_error_text().find("WRONGTYPE") != std::string::npos, st.last_error_text());
            } else if (i == 9) {
                BOOST_TEST(!ec);
                BOOST_TEST(!r.owned);
            } else {
                BOOST_TEST((!ec && r.owned), "lease " << i << ": " << ec.message());
            }
        }
        // Renewed means extended: the new 7 s, not the 5 s it was taken with.
        auto pttl = std::atoll(srv.cli({"PTTL", st.lock_key("b0")}).c_str());
        BOOST_TEST(pttl > 5000);
        BOOST_TEST(std::atoll(srv.cli({"PTTL", st.lock_key("b9")}).c_str()) <= 5000);
        st.close();
    });
}

// A contended lease still learns it from a batched renewal (the flag is per lease).
BOOST_AUTO_TEST_CASE(a_batched_renewal_reports_contention)
{
    redis_server srv;
    asio::io_context io;
    dlock::redis_store st(io.get_executor(), srv.config());
    run_test(io, [&]() -> asio::awaitable<void> {
        for (auto n : {"c0", "c1"}) {
            auto [ec, r] = co_await st.async_try_acquire(n, std::string("t-") + n, 5s, use_tuple);
            BOOST_TEST_REQUIRE((!ec && r.acquired));
        }
        auto [ec, refused] = co_await st.async_try_acquire("c1", "other", 5s, use_tuple);
        BOOST_TEST_REQUIRE((!ec && !refused.acquired));
        std::vector<dlock::renew_result> got(2);
        int answered = 0;
        dlock::test::notifier done(io.get_executor());
        for (int i = 0; i < 2; ++i)
            st.async_renew("c" + std::to_string(i), "t-c" + std::to_string(i), 5s,
                           [&, i](boost::system::error_code ec, dlock::renew_result r) {
                               BOOST_TEST(!ec);
                               got[std::size_t(i)] = r;
                               ++answered;
                               done.notify();
                           });
        BOOST_TEST_REQUIRE((co_await done.wait([&] { return answered == 2; })));
        BOOST_TEST((got[0].owned && !got[0].contended));
        BOOST_TEST((got[1].owned && got[1].contended));
        st.close();
    });
}

// Through a registry: 40 held locks renew on the watchdog's grid, so the server runs far
// fewer script calls than there are renewals, and every lease stays valid.
BOOST_AUTO_TEST_CASE(the_watchdog_aligns_renewals_so_they_share_calls)
{
    redis_server srv;
    asio::io_context io;
    dlock::redis_store st(io.get_executor(), srv.config());
    dlock::test::notifier renewed(io.get_executor());
    int renewals = 0;
    dlock::registry reg(st, {.lease = 1500ms, .on_event = [&](const dlock::lock_event& e) {
                                 if (e.kind == dlock::lock_event_kind::renewed) {
                                     ++renewals;
                                     renewed.notify();
                                 }
                             }});
    constexpr int locks = 40;
    run_test(
        io,
        [&]() -> asio::awaitable<void> {
            std::vector<dlock::guard> held;
            for (int i = 0; i < locks; ++i)
                held.push_back(co_await reg.obtain("w" + std::to_string(i)).acquire());
            auto before = script_calls(srv);
            // Three rounds of renewals (every 500 ms).
            BOOST_TEST_REQUIRE((co_await renewed.wait([&] { return renewals >= 3 * locks; }, 10s)));
            auto calls = script_calls(srv) - before;
            BOOST_TEST_MESSAGE(renewals << " renewals in " << calls << " script calls");
            BOOST_TEST(calls * 4 <= renewals, calls << " calls for " << renewals << " renewals");
            for (auto& g : held) {
                BOOST_TEST(!g.is_lost());
                co_await g.release();
            }
            BOOST_TEST(reg.stats().lost == 0u);
            st.close();
        },
        30s);
}

BOOST_AUTO_TEST_SUITE_END()
