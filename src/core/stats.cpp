// SPDX-License-Identifier: BSL-1.0
#include <dlock/stats.hpp>

#include <bit>

namespace dlock {

void histogram::record(std::chrono::microseconds d) noexcept
{
    auto us = static_cast<std::uint64_t>(d.count() < 0 ? 0 : d.count());
    std::size_t i = std::min<std::size_t>(std::bit_width(us), buckets.size() - 1);
    ++buckets[i];
    ++count;
    max_us = std::max(max_us, us);
}

std::uint64_t histogram::quantile_us(double q) const noexcept
{
    if (count == 0)
        return 0;
    auto target = static_cast<std::uint64_t>(q * static_cast<double>(count));
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < buckets.size(); ++i) {
        seen += buckets[i];
        if (seen > target)
            return i == 0 ? 0 : std::min<std::uint64_t>(std::uint64_t{1} << i, max_us);
    }
    return max_us;
}

}  // namespace dlock
