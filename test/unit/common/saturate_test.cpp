// SPDX-License-Identifier: BSL-1.0
// Saturating chrono arithmetic: deadlines from huge durations clamp instead of wrapping.
#include "common/saturate.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <limits>

using namespace std::chrono_literals;
using dlock::detail::saturating_add;
using dlock::detail::saturating_duration_cast;
using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

BOOST_AUTO_TEST_SUITE(saturate_suite)

BOOST_AUTO_TEST_CASE(cast_in_range_matches_duration_cast)
{
    BOOST_TEST(saturating_duration_cast<milliseconds>(3h).count() == 10'800'000);
    BOOST_TEST(saturating_duration_cast<nanoseconds>(1500ms).count() == 1'500'000'000);
    BOOST_TEST(saturating_duration_cast<seconds>(1999ms).count() == 1);    // truncates like duration_cast
    BOOST_TEST(saturating_duration_cast<seconds>(-1999ms).count() == -1);  // towards zero
    BOOST_TEST(saturating_duration_cast<milliseconds>(milliseconds::max()) == milliseconds::max());
    BOOST_TEST(saturating_duration_cast<milliseconds>(nanoseconds::max()) ==
               std::chrono::duration_cast<milliseconds>(nanoseconds::max()));
    // An odd ratio: 7/3 of a second per unit.
    using odd = std::chrono::duration<long long, std::ratio<7, 3>>;
    BOOST_TEST(saturating_duration_cast<milliseconds>(odd(3)).count() == 7000);
    BOOST_TEST(saturating_duration_cast<milliseconds>(odd(1)).count() == 2333);
}

BOOST_AUTO_TEST_CASE(cast_clamps_where_duration_cast_overflows)
{
    BOOST_TEST(saturating_duration_cast<nanoseconds>(milliseconds::max()) == nanoseconds::max());
    BOOST_TEST(saturating_duration_cast<nanoseconds>(milliseconds::min()) == nanoseconds::min());
    BOOST_TEST(saturating_duration_cast<milliseconds>(hours::max()) == milliseconds::max());
    BOOST_TEST(saturating_duration_cast<nanoseconds>(3'000'000h) == nanoseconds::max());
    BOOST_TEST(saturating_duration_cast<nanoseconds>(-3'000'000h) == nanoseconds::min());
    // A narrower representation clamps too.
    using ms32 = std::chrono::duration<int, std::milli>;
    BOOST_TEST(saturating_duration_cast<ms32>(seconds(3'000'000)).count() == std::numeric_limits<int>::max());
    // The largest value that fits is kept exactly, one more unit clamps.
    constexpr long long max_ms = nanoseconds::max().count() / 1'000'000;
    BOOST_TEST(saturating_duration_cast<nanoseconds>(milliseconds(max_ms)).count() == max_ms * 1'000'000);
    BOOST_TEST(saturating_duration_cast<nanoseconds>(milliseconds(max_ms + 1)) == nanoseconds::max());
}

BOOST_AUTO_TEST_CASE(add_in_range_is_plain_addition)
{
    auto now = steady_clock::now();
    BOOST_TEST((saturating_add(now, 250ms) == now + 250ms));
    BOOST_TEST((saturating_add(now, -250ms) == now - 250ms));
    BOOST_TEST((saturating_add(now, 0ms) == now));
    BOOST_TEST((saturating_add(now, 24h) == now + 24h));
}

BOOST_AUTO_TEST_CASE(add_saturates_at_the_ends)
{
    auto now = steady_clock::now();
    BOOST_TEST((saturating_add(now, milliseconds::max()) == steady_clock::time_point::max()));
    BOOST_TEST((saturating_add(now, 3'000'000h) == steady_clock::time_point::max()));
    BOOST_TEST((saturating_add(now, hours::max()) == steady_clock::time_point::max()));
    BOOST_TEST((saturating_add(steady_clock::time_point::max(), 1ns) == steady_clock::time_point::max()));
    BOOST_TEST((saturating_add(steady_clock::time_point::max() - 1ns, 1ns) == steady_clock::time_point::max()));
    BOOST_TEST(
        (saturating_add(steady_clock::time_point::min() + 1h, milliseconds::min()) == steady_clock::time_point::min()));
    BOOST_TEST((saturating_add(steady_clock::time_point::min(), -1ns) == steady_clock::time_point::min()));
    // The result is always in the future for a positive duration, never wrapped into the past.
    BOOST_TEST((saturating_add(now, milliseconds(nanoseconds::max().count() / 1'000'000)) > now));
    constexpr auto tmax = std::chrono::time_point<steady_clock, milliseconds>::max();
    static_assert(saturating_add(tmax, 1ms) == tmax, "usable in constant expressions");
}

BOOST_AUTO_TEST_SUITE_END()
