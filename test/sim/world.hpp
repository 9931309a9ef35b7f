// SPDX-License-Identifier: BSL-1.0
// The simulator's world: virtual real time, one queue of events ordered by (time, sequence),
// the seeded random source every choice draws from, and the trace a failing schedule prints.
// Nothing here reads a clock or sleeps: a schedule is a function of its seed.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <queue>
#include <random>
#include <string>
#include <vector>

namespace dlock::sim {

/// Real time in the simulated world, from the start of a schedule.
using real_time = std::chrono::nanoseconds;
using std::chrono::milliseconds;

class world {
public:
    explicit world(std::uint64_t seed) : rng_(seed) {}

    real_time now() const noexcept { return now_; }
    /// Runs `f` at `t` (not before now); events at one time run in the order they were set.
    void at(real_time t, std::function<void()> f) { queue_.push(event{std::max(t, now_), ++seq_, std::move(f)}); }
    void after(real_time d, std::function<void()> f) { at(now_ + d, std::move(f)); }
    /// Runs every event due up to `end`; false if none is left before it.
    void run_until(real_time end)
    {
        while (!queue_.empty() && queue_.top().t <= end) {
            auto e = queue_.top();
            queue_.pop();
            now_ = e.t;
            e.f();
        }
        now_ = std::max(now_, end);
    }
    bool empty() const noexcept { return queue_.empty(); }

    /// A uniform draw in [lo, hi].
    std::int64_t uniform(std::int64_t lo, std::int64_t hi)
    {
        return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng_);
    }
    double unit() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }
    bool chance(double p) { return unit() < p; }
    real_time ms(std::int64_t lo, std::int64_t hi) { return milliseconds(uniform(lo, hi)); }
    std::uint64_t draw() { return rng_(); }

    /// The schedule's trace: every fault and every grant, release and loss, with its time.
    void log(const std::string& line)
    {
        trace_.push_back(std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(now_).count()) + " us  " +
                         line);
    }
    const std::vector<std::string>& trace() const noexcept { return trace_; }
    /// Every machine action in the trace too (a replay with --verbose).
    bool verbose = false;

private:
    struct event {
        real_time t;
        std::uint64_t seq;
        std::function<void()> f;
        bool operator>(const event& o) const noexcept { return t != o.t ? t > o.t : seq > o.seq; }
    };
    real_time now_{0};
    std::uint64_t seq_ = 0;
    std::mt19937_64 rng_;
    std::priority_queue<event, std::vector<event>, std::greater<>> queue_;
    std::vector<std::string> trace_;
};

}  // namespace dlock::sim
