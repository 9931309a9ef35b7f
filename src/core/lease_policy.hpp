// SPDX-License-Identifier: BSL-1.0
// Sans-io rules of a lease: validation against the settings and the store's traits, and
// the settings' derived values. Pure functions, unit-tested in test/unit/core/lease_policy_test.cpp.
#pragma once

#include <dlock/config.hpp>
#include <dlock/store.hpp>

#include <boost/system/error_code.hpp>

#include <chrono>
#include <optional>
#include <string_view>

namespace dlock::detail {

using std::chrono::milliseconds;

/// The margin taken off each lease locally (config::drift, or lease/100 + 2 ms).
milliseconds effective_drift(const lock_config& cfg) noexcept;
/// How often the watchdog renews (config::renew_interval, or lease/3).
milliseconds effective_renew_interval(const lock_config& cfg) noexcept;

/// The longest lease any store gets: far beyond any real use, and small enough that the
/// clock arithmetic on it cannot overflow (steady_clock counts nanoseconds in 64 bits).
inline constexpr milliseconds max_lease{milliseconds(1) * (std::int64_t{1} << 40)};  // ~34 years

/// invalid_lease if the settings cannot give a usable lease on a store with `traits`
/// (including a lease the store cannot set); invalid_option for bad backoff settings;
/// not_supported if cfg.needs asks for what the store does not serve (`capabilities`:
/// store::capabilities(); by default what `traits` serves).
boost::system::error_code validate_config(const lock_config& cfg, const store_traits& traits = {},
                                          std::optional<unsigned> capabilities = std::nullopt) noexcept;
/// invalid_name for an empty or oversized name.
boost::system::error_code validate_name(const lock_config& cfg, std::string_view name) noexcept;

}  // namespace dlock::detail
