// SPDX-License-Identifier: BSL-1.0
// Durations as configuration text: "250ms", "5s", "2m", "1h" or plain milliseconds.
#pragma once

#include <chrono>
#include <string_view>

namespace dlock::detail {

/// False on anything else (a sign, a space, an unknown unit, an overflow).
bool parse_duration(std::string_view text, std::chrono::milliseconds& out);

}  // namespace dlock::detail
