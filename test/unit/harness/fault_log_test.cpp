// SPDX-License-Identifier: BSL-1.0
// The fault runs' judge (test/common/fault_log.hpp) on logs written by hand: it must catch an
// overlap and a token out of grant order, and excuse what a lost or killed holder did.
#include "common/fault_log.hpp"

#include <boost/test/unit_test.hpp>

#include <sstream>

namespace {

dlock::test::fault_report judge(const std::string& text)
{
    std::istringstream in(text);
    return dlock::test::judge_fault_log(in);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(fault_log)

BOOST_AUTO_TEST_CASE(turns_in_order_pass)
{
    auto r = judge("B 1 5 100\nE 1 5 200 1\nB 2 6 210\nE 2 6 300 1\nB 1 7 310\nE 1 7 400 1\n");
    BOOST_TEST(r.sections == 3u);
    BOOST_TEST(r.valid == 3u);
    BOOST_TEST(r.overlaps.empty());
    BOOST_TEST(r.order.empty());
    BOOST_TEST(r.valid_since(300) == 1u);
}

BOOST_AUTO_TEST_CASE(two_valid_holders_at_once_are_an_overlap)
{
    // Lines may land out of time order (a worker paused between reading the clock and writing).
    auto r = judge("B 1 5 100\nB 2 6 150\nE 2 6 180 1\nE 1 5 200 1\n");
    BOOST_TEST(r.overlaps.size() == 1u);
    BOOST_TEST(r.order.empty());
}

BOOST_AUTO_TEST_CASE(a_lost_holder_is_excused)
{
    // Process 1 was paused past its lease: it knows (OK = 0), and 2's token is higher.
    auto r = judge("B 1 5 100\nB 2 6 150\nE 2 6 180 1\nE 1 5 900 0\n");
    BOOST_TEST(r.overlaps.empty());
    BOOST_TEST(r.lost == 1u);
    BOOST_TEST(r.valid == 1u);
}

BOOST_AUTO_TEST_CASE(a_lower_token_granted_later_is_out_of_order)
{
    // PostgreSQL's old acquire: token 2 drawn early, granted after token 3.
    auto r = judge("B 2 3 100\nE 2 3 200 1\nB 1 2 300\nE 1 2 400 1\n");
    BOOST_TEST(r.overlaps.empty());
    BOOST_TEST(r.order.size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_killed_holder_and_garbage_are_counted_not_judged)
{
    auto r = judge("B 1 5 100\nB 1 8 400\nE 1 8 500 1\nE 3 9 10 1\nnonsense\n");
    BOOST_TEST(r.unfinished == 1u);
    BOOST_TEST(r.malformed == 3u);  // the B without an E, the E without a B, the nonsense
    BOOST_TEST(r.valid == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
