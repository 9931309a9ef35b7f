// SPDX-License-Identifier: BSL-1.0
#include "core/lease_policy.hpp"

#include <dlock/error.hpp>

namespace dlock::detail {

milliseconds effective_drift(const lock_config& cfg) noexcept
{
    if (cfg.drift.count() > 0)
        return cfg.drift;
    return cfg.lease / 100 + milliseconds(2);
}

milliseconds effective_renew_interval(const lock_config& cfg) noexcept
{
    if (cfg.renew_interval.count() > 0)
        return cfg.renew_interval;
    return std::max(cfg.lease / 3, milliseconds(1));
}

boost::system::error_code validate_config(const lock_config& cfg, const store_traits& traits,
                                          std::optional<unsigned> capabilities) noexcept
{
    if (cfg.drift.count() < 0 || cfg.renew_interval.count() < 0 || cfg.drift > max_lease ||
        cfg.renew_interval > max_lease)
        return error::invalid_lease;
    if (cfg.lease.count() <= 0 || cfg.lease > max_lease || cfg.lease > traits.max_ttl || cfg.lease < traits.min_ttl)
        return error::invalid_lease;
    if (traits.ttl_granularity.count() > 1 && cfg.lease % traits.ttl_granularity != milliseconds(0))
        return error::invalid_lease;
    // The lease must outlast its own drift margin and leave the watchdog time to renew.
    if (cfg.lease <= effective_drift(cfg) * 2)
        return error::invalid_lease;
    if (cfg.watchdog && effective_renew_interval(cfg) + effective_drift(cfg) >= cfg.lease)
        return error::invalid_lease;
    if (cfg.backoff_min.count() <= 0 || cfg.backoff_max < cfg.backoff_min || cfg.backoff_max > max_lease)
        return error::invalid_option;
    if (cfg.needs & ~capabilities.value_or(capabilities_of(traits)))
        return error::not_supported;  // asked for what the store does not serve
    return {};
}

boost::system::error_code validate_name(const lock_config& cfg, std::string_view name) noexcept
{
    if (name.empty() || name.size() > cfg.max_name_length)
        return error::invalid_name;
    return {};
}

}  // namespace dlock::detail
