// SPDX-License-Identifier: BSL-1.0
#include "common/duration.hpp"

#include <charconv>
#include <limits>

namespace dlock::detail {

bool parse_duration(std::string_view text, std::chrono::milliseconds& out)
{
    std::size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9')
        ++digits;
    long long n = 0;
    if (digits == 0)
        return false;
    auto [p, ec] = std::from_chars(text.data(), text.data() + digits, n);
    if (ec != std::errc() || p != text.data() + digits)
        return false;
    std::string_view unit = text.substr(digits);
    long long scale = 0;
    if (unit.empty() || unit == "ms")
        scale = 1;
    else if (unit == "s")
        scale = 1000;
    else if (unit == "m")
        scale = 60'000;
    else if (unit == "h")
        scale = 3'600'000;
    else
        return false;
    if (n > std::numeric_limits<long long>::max() / scale)
        return false;
    out = std::chrono::milliseconds(n * scale);
    return true;
}

}  // namespace dlock::detail
