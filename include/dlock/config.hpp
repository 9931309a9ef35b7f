// SPDX-License-Identifier: BSL-1.0
/// @file
/// Lock behaviour settings for a registry. Every field has a working default.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

namespace dlock {

struct lock_event;

/// Settings of a registry and of every lock it hands out.
struct lock_config {
    /// Prepended to every name as "prefix:name", so applications sharing a store don't collide.
    std::string prefix = "dlock";
    /// The store lease. With the watchdog on, it is how long a crashed holder keeps the
    /// lock; with it off, how long every hold lasts. Must be positive and above `drift`.
    std::chrono::milliseconds lease{30'000};
    /// Renew the lease while it is held (every `renew_interval`). Off: a fixed lease that
    /// ends after `lease` whatever the holder does (release() then reports lock_lost).
    bool watchdog = true;
    /// Zero: lease / 3.
    std::chrono::milliseconds renew_interval{0};
    /// Clock-drift margin taken off every lease locally. Zero: lease / 100 + 2 ms.
    std::chrono::milliseconds drift{0};
    /// Longest accepted name (bytes, before the prefix).
    std::size_t max_name_length = 1024;
    /// What this registry will be asked for beyond the mutex (capability values or-ed, e.g.
    /// `capability::semaphore | capability::latch`): a store that lacks one is refused when
    /// the registry is built (registry::config_error() is not_supported, and so is every
    /// acquire), not at the first use. 0: the mutex only.
    unsigned needs = 0;
    /// Local hand-offs (same process, no store round trip) before the lease is checked for
    /// waiters in other processes; if any, the lease goes back to the store. 0: never hand off.
    unsigned handoff_budget = 16;
    /// Retry backoff when the store fails or gives no hint (jittered, doubling): the first
    /// delay, then doubled per retry up to backoff_max. Must be positive and at most backoff_max
    /// (error::invalid_option otherwise).
    std::chrono::milliseconds backoff_min{5};
    std::chrono::milliseconds backoff_max{1'000};  ///< the longest retry delay
    /// After yielding a contended lease, how long this process waits before competing again,
    /// so a waiter in another process wins the race. Zero: no pause.
    std::chrono::microseconds yield_pause{500};
    /// Called for acquired / renewed / suspect / lost / released, on the executor. Must not block.
    std::function<void(const lock_event&)> on_event{};
};

}  // namespace dlock
