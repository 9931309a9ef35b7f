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

boost::system::error_code validate_config(const lock_config& cfg) noexcept
{
    if (cfg.lease.count() <= 0)
        return error::invalid_lease;
    // The lease must outlast its own drift margin and leave the watchdog time to renew.
    if (cfg.lease <= effective_drift(cfg) * 2)
        return error::invalid_lease;
    if (cfg.watchdog && effective_renew_interval(cfg) + effective_drift(cfg) >= cfg.lease)
        return error::invalid_lease;
    if (cfg.backoff_min.count() <= 0 || cfg.backoff_max < cfg.backoff_min)
        return error::invalid_option;
    return {};
}

boost::system::error_code validate_name(const lock_config& cfg, std::string_view name) noexcept
{
    if (name.empty() || name.size() > cfg.max_name_length)
        return error::invalid_name;
    return {};
}

milliseconds jitter(milliseconds d, std::minstd_rand& rng) noexcept
{
    if (d.count() <= 1)
        return d;
    std::uniform_int_distribution<long long> pick(d.count() / 2, d.count());
    return milliseconds(pick(rng));
}

clock_type::time_point retry_at(clock_type::time_point now, milliseconds holder_ttl, milliseconds backoff,
                                std::minstd_rand& rng) noexcept
{
    // +1 ms: PTTL rounds down, and a retry a hair before expiry would only fail again.
    if (holder_ttl.count() >= 0)
        return now + holder_ttl + milliseconds(1);
    return now + jitter(backoff, rng);
}

}  // namespace dlock::detail
