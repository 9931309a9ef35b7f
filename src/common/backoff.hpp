// SPDX-License-Identifier: BSL-1.0
// Retry spacing shared by every driver: doubling, capped, with "equal jitter".
#pragma once

#include <algorithm>
#include <chrono>
#include <random>

namespace dlock::detail {

/// A random duration in [d/2, d] ("equal jitter"): contenders that failed together spread
/// out, and none retries much sooner than its step says.
inline std::chrono::milliseconds equal_jitter(std::chrono::milliseconds d, std::minstd_rand& rng) noexcept
{
    if (d.count() <= 1)
        return d;
    std::uniform_int_distribution<long long> pick(d.count() / 2, d.count());
    return std::chrono::milliseconds(pick(rng));
}

/// Exponential backoff: next() gives the jittered current step and doubles it up to `max`.
class backoff {
public:
    backoff(std::chrono::milliseconds min, std::chrono::milliseconds max) noexcept
        : min_(min), max_(std::max(min, max)), step_(min)
    {
    }
    std::chrono::milliseconds next(std::minstd_rand& rng) noexcept
    {
        auto d = equal_jitter(step_, rng);
        step_ = std::min(step_ * 2, max_);
        return d;
    }
    /// The un-jittered step next() would draw from.
    std::chrono::milliseconds step() const noexcept { return step_; }
    void reset() noexcept { step_ = min_; }

private:
    std::chrono::milliseconds min_, max_, step_;
};

/// The same doubling with the bounds kept by the caller: a byte, not three durations, in
/// state that every held lock carries.
class backoff_count {
public:
    std::chrono::milliseconds step(std::chrono::milliseconds min, std::chrono::milliseconds max) const noexcept
    {
        max = std::max(min, max);
        auto s = min;
        for (unsigned i = 0; i < n_ && s < max && s.count() > 0; ++i)
            s *= 2;
        return std::min(s, max);
    }
    std::chrono::milliseconds next(std::chrono::milliseconds min, std::chrono::milliseconds max,
                                   std::minstd_rand& rng) noexcept
    {
        auto d = equal_jitter(step(min, max), rng);
        if (n_ < 62)
            ++n_;
        return d;
    }
    void reset() noexcept { n_ = 0; }

private:
    unsigned char n_ = 0;
};

}  // namespace dlock::detail
