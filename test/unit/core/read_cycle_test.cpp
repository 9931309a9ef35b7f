// SPDX-License-Identifier: BSL-1.0
// The read cycle of latch waits and election observers (src/core/read_cycle.hpp): one read
// at a time, one more for any event during it, the watch after the first good read.
#include "core/read_cycle.hpp"

#include <boost/test/unit_test.hpp>

using dlock::detail::read_cycle;
using next = read_cycle::next;

BOOST_AUTO_TEST_SUITE(read_cycle_machine)

BOOST_AUTO_TEST_CASE(the_first_good_read_asks_for_the_watch_and_events_during_a_read_ask_for_one_more)
{
    read_cycle r;
    BOOST_TEST(r.want());   // none running: read now
    BOOST_TEST(!r.want());  // during it: one more, later
    BOOST_TEST(!r.want());  // still one more, not two
    r.replied();
    BOOST_TEST(r.watch_pending());
    BOOST_TEST((r.after_good_read() == next::watch));  // the watch's `ready` reads again
    BOOST_TEST(!r.watch_pending());
    BOOST_TEST(r.want());
    BOOST_TEST(!r.want());
    r.replied();
    BOOST_TEST((r.after_good_read() == next::read));  // the event during the read
    BOOST_TEST(r.want());
    r.replied();
    BOOST_TEST((r.after_good_read() == next::none));
}

BOOST_AUTO_TEST_CASE(without_a_watch_a_good_read_ends_the_cycle)
{
    read_cycle r(false);
    BOOST_TEST(!r.watch_pending());
    BOOST_TEST(r.want());
    r.replied();
    BOOST_TEST((r.after_good_read() == next::none));
}

BOOST_AUTO_TEST_CASE(a_failed_read_leaves_the_watch_for_the_next_good_one)
{
    read_cycle r;
    BOOST_TEST(r.want());
    r.replied();  // a transient error: the caller retries without asking after_good_read()
    BOOST_TEST(r.watch_pending());
    BOOST_TEST(r.want());
    r.replied();
    BOOST_TEST((r.after_good_read() == next::watch));
}

BOOST_AUTO_TEST_SUITE_END()
