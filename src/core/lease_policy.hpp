// Sans-io rules of a lease: validation, local deadlines, wait and backoff choices.
// Pure functions of their inputs, unit-tested without a store or a clock.
#pragma once

#include <dlock/config.hpp>

#include <boost/system/error_code.hpp>

#include <chrono>
#include <random>
#include <string_view>

namespace dlock::detail {

using clock_type = std::chrono::steady_clock;
using std::chrono::milliseconds;

/// The margin taken off each lease locally (config::drift, or lease/100 + 2 ms).
milliseconds effective_drift(const lock_config& cfg) noexcept;
/// How often the watchdog renews (config::renew_interval, or lease/3).
milliseconds effective_renew_interval(const lock_config& cfg) noexcept;

/// invalid_lease if the configuration cannot give a usable lease.
boost::system::error_code validate_config(const lock_config& cfg) noexcept;
/// invalid_name for an empty or oversized name.
boost::system::error_code validate_name(const lock_config& cfg, std::string_view name) noexcept;

/// A lease is ours locally until the request's *send* time + lease − drift: the store
/// started counting no earlier than that, whatever the reply's delay.
inline clock_type::time_point lease_deadline(clock_type::time_point sent, milliseconds lease,
                                             milliseconds drift) noexcept
{
    return sent + lease - drift;
}

/// When a failed attempt should be retried if no notification comes first: at the holder's
/// lease end when the store told it, else after a jittered backoff.
clock_type::time_point retry_at(clock_type::time_point now, milliseconds holder_ttl, milliseconds backoff,
                                std::minstd_rand& rng) noexcept;

/// Full jitter in [d/2, d], so contenders that failed together do not retry together.
milliseconds jitter(milliseconds d, std::minstd_rand& rng) noexcept;

/// The next backoff: doubled, capped.
inline milliseconds next_backoff(milliseconds d, const lock_config& cfg) noexcept
{
    return std::min(d * 2, cfg.backoff_max);
}

}  // namespace dlock::detail
