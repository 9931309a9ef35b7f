// SPDX-License-Identifier: BSL-1.0
// Chrono arithmetic that clamps instead of overflowing, for deadlines built from user input
// ("wait 3000000h" must mean "a very long time", not a deadline in the past).
#pragma once

#include <chrono>
#include <limits>
#include <ratio>
#include <type_traits>

namespace dlock::detail {

/// `d` converted to `To`, truncated towards zero like duration_cast, but clamped to
/// [To::min(), To::max()] where duration_cast would overflow. Integer representations only.
template <class To, class Rep, class Period>
    requires std::is_integral_v<Rep> && std::is_integral_v<typename To::rep>
constexpr To saturating_duration_cast(std::chrono::duration<Rep, Period> d) noexcept
{
    using to_rep = typename To::rep;
    using r = std::ratio_divide<Period, typename To::period>;  // one unit of `d` in To units
    // Wide enough for both representations; the checks below keep every step in range.
    using wide = std::common_type_t<Rep, to_rep, std::intmax_t>;
    constexpr wide hi = static_cast<wide>(std::numeric_limits<to_rep>::max());
    constexpr wide lo = static_cast<wide>(std::numeric_limits<to_rep>::min());
    wide v = static_cast<wide>(d.count());
    // v * num / den, as (v / den) * num + (v % den) * num / den, so the product fits.
    wide q = v / static_cast<wide>(r::den);
    wide rem = v % static_cast<wide>(r::den);
    if (q > hi / static_cast<wide>(r::num))
        return To(std::numeric_limits<to_rep>::max());
    if (q < lo / static_cast<wide>(r::num))
        return To(std::numeric_limits<to_rep>::min());
    wide scaled = q * static_cast<wide>(r::num);
    wide extra = rem * static_cast<wide>(r::num) / static_cast<wide>(r::den);
    if (extra > 0 && scaled > hi - extra)
        return To(std::numeric_limits<to_rep>::max());
    if (extra < 0 && scaled < lo - extra)
        return To(std::numeric_limits<to_rep>::min());
    return To(static_cast<to_rep>(scaled + extra));
}

/// `t + d`, or time_point::max() (min() for a negative `d`) where the sum would not fit:
/// a deadline too far away to represent is "never". `d` may be in any integer unit; it is
/// converted to the time point's unit with saturating_duration_cast first.
template <class Clock, class Dur, class Rep, class Period>
constexpr std::chrono::time_point<Clock, Dur> saturating_add(std::chrono::time_point<Clock, Dur> t,
                                                             std::chrono::duration<Rep, Period> d) noexcept
{
    using tp = std::chrono::time_point<Clock, Dur>;
    Dur step = saturating_duration_cast<Dur>(d);
    Dur since = t.time_since_epoch();
    if (step > Dur::zero() && since > Dur::max() - step)
        return tp::max();
    if (step < Dur::zero() && since < Dur::min() - step)
        return tp::min();
    return tp(since + step);
}

}  // namespace dlock::detail
