// SPDX-License-Identifier: BSL-1.0
// Counters and histograms a registry keeps for its locks.
#pragma once

#include <dlock/export.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <string_view>

namespace dlock {

/// A log2 histogram of microseconds: bucket i counts values in [2^(i-1), 2^i) µs.
struct DLOCK_API histogram {
    std::array<std::uint64_t, 40> buckets{};
    std::uint64_t count = 0;
    std::uint64_t max_us = 0;

    /// Adds one value.
    void record(std::chrono::microseconds d) noexcept;
    /// Upper bound of the bucket that holds quantile q (0..1), in µs.
    std::uint64_t quantile_us(double q) const noexcept;
};

/// Per-registry counters since construction; read them on the registry's executor.
struct lock_stats {
    std::uint64_t acquired = 0;        ///< holds granted (re-entries included)
    std::uint64_t reentered = 0;       ///< holds granted to an owner that already held
    std::uint64_t contended = 0;       ///< store attempts that found another holder
    std::uint64_t handed_off = 0;      ///< leases passed to a local waiter without the store
    std::uint64_t yielded = 0;         ///< leases given back because another process waited
    std::uint64_t store_handoffs = 0;  ///< leases handed here by another process's release (direct hand-off)
    std::uint64_t woken_by_notification = 0;
    std::uint64_t woken_by_timer = 0;
    std::uint64_t renewals = 0;
    std::uint64_t suspect = 0;  ///< leases whose renewal failed (store unreachable)
    std::uint64_t lost = 0;
    std::uint64_t released = 0;
    std::uint64_t released_by_destructor = 0;
    std::uint64_t store_errors = 0;
    std::uint64_t late_replies = 0;  ///< acquire replies that came after the lease's local end
    std::uint64_t cancelled = 0;     ///< acquires cancelled or timed out
    histogram wait;                  ///< acquire call -> granted
    histogram hold;                  ///< granted -> released
};

enum class lock_event_kind : std::uint8_t {
    acquired,
    renewed,
    suspect,
    lost,
    released
};

/// What lock_config::on_event receives; `name` is valid during the call only.
struct lock_event {
    lock_event_kind kind;
    std::string_view name;
    std::uint64_t fencing_token;
};

}  // namespace dlock
