// SPDX-License-Identifier: BSL-1.0
// A SQL result cell (text, or NULL) read as a number: the SQL stores' decoders share these.
#pragma once

#include <charconv>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace dlock::detail {

/// The whole cell as an unsigned decimal; false for NULL, empty or anything else.
inline bool cell_u64(const std::optional<std::string>& s, std::uint64_t& out)
{
    if (!s || s->empty())
        return false;
    auto [end, ec] = std::from_chars(s->data(), s->data() + s->size(), out);
    return ec == std::errc() && end == s->data() + s->size();
}

/// The cell as a count of milliseconds.
inline bool cell_ms(const std::optional<std::string>& s, std::chrono::milliseconds& out)
{
    std::uint64_t v = 0;
    if (!cell_u64(s, v))
        return false;
    out = std::chrono::milliseconds(static_cast<std::int64_t>(v));
    return true;
}

}  // namespace dlock::detail
