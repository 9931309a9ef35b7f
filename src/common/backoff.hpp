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

}  // namespace dlock::detail
