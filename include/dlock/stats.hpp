// SPDX-License-Identifier: BSL-1.0
/// @file
/// Counters and histograms a registry keeps for its locks.
#pragma once

#include <dlock/export.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <string_view>

namespace dlock {

/// A log2 histogram of microseconds: bucket i counts values in [2^(i-1), 2^i) µs.
/// @threadsafety None: lock_stats is updated on the registry's executor; read it there.
struct DLOCK_API histogram {
    /// Bucket 0 counts 0 µs, bucket i values in [2^(i-1), 2^i) µs; the last also all larger.
    std::array<std::uint64_t, 40> buckets{};
    std::uint64_t count = 0;   ///< values recorded
    std::uint64_t max_us = 0;  ///< the largest value recorded, in µs

    /// Adds one value (a negative one counts as 0).
    void record(std::chrono::microseconds d) noexcept;
    /// Upper bound of the bucket that holds quantile q (0..1), in µs, capped at max_us; 0 if empty.
    std::uint64_t quantile_us(double q) const noexcept;
};

/// Per-registry counters since construction (registry::stats()).
/// @threadsafety Updated on the registry's executor: read them there.
struct lock_stats {
    std::uint64_t acquired = 0;                ///< holds granted (re-entries included)
    std::uint64_t reentered = 0;               ///< holds granted to an owner that already held
    std::uint64_t contended = 0;               ///< store attempts that found another holder
    std::uint64_t handed_off = 0;              ///< leases passed to a local waiter without the store
    std::uint64_t yielded = 0;                 ///< leases given back because another process waited
    std::uint64_t store_handoffs = 0;          ///< leases handed here by another process's release (direct hand-off)
    std::uint64_t woken_by_notification = 0;   ///< sleeping waiters woken by the store (a release, a grant)
    std::uint64_t woken_by_timer = 0;          ///< sleeping waiters woken by their retry timer
    std::uint64_t renewals = 0;                ///< renewals the store confirmed
    std::uint64_t suspect = 0;                 ///< leases whose renewal failed (store unreachable)
    std::uint64_t lost = 0;                    ///< leases lost (expired locally, or not ours at the store)
    std::uint64_t released = 0;                ///< holds released (guard::release or a guard's destructor)
    std::uint64_t released_by_destructor = 0;  ///< of those, by a guard's destructor
    std::uint64_t store_errors = 0;            ///< store operations that failed (attempts, renewals, releases)
    std::uint64_t late_replies = 0;            ///< acquire replies that came after the lease's local end
    std::uint64_t cancelled = 0;               ///< acquires cancelled or timed out
    histogram wait;                            ///< acquire call -> granted
    histogram hold;                            ///< granted -> released
};

/// What happened to a lock (lock_event::kind).
enum class lock_event_kind : std::uint8_t {
    acquired,  ///< a hold was granted (re-entries and local hand-offs included)
    renewed,   ///< the store confirmed a renewal of the lease
    suspect,   ///< a renewal failed (the store did not answer): the lease may still be ours
    lost,      ///< the lease ended before its release: holders must stop
    released   ///< the last hold of the lease was released
};

/// What lock_config::on_event receives; `name` is valid during the call only.
struct lock_event {
    lock_event_kind kind;         ///< what happened
    std::string_view name;        ///< the lock's name as given to registry::obtain
    std::uint64_t fencing_token;  ///< the lease's fencing token
};

}  // namespace dlock
