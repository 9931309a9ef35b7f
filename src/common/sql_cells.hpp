// SPDX-License-Identifier: BSL-1.0
// A SQL result cell (text, or NULL) read as a number, a boolean or a lease's status, and a
// table's name quoted: the SQL stores' statements and decoders share these.
#pragma once

#include <dlock/store.hpp>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dlock::detail {

/// The whole cell as an unsigned decimal; false for NULL, empty or anything else.
inline bool cell_u64(const std::optional<std::string>& s, std::uint64_t& out)
{
    if (!s || s->empty())
        return false;
    auto [end, ec] = std::from_chars(s->data(), s->data() + s->size(), out);
    return ec == std::errc() && end == s->data() + s->size();
}

/// The whole cell as a signed decimal; false for NULL, empty or anything else.
inline bool cell_i64(const std::optional<std::string>& s, long long& out)
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

/// How a dialect writes a boolean cell ("t"/"f", "1"/"0").
struct bool_cells {
    std::string_view yes, no;
};
/// The cell as a boolean; false for NULL or anything else.
inline bool cell_bool(const std::optional<std::string>& s, bool_cells b, bool& out)
{
    if (!s || (*s != b.yes && *s != b.no))
        return false;
    out = *s == b.yes;
    return true;
}

/// A status row's first cells, owner (not NULL), fence, remaining ms and live, into `out`
/// (held only if live); `fence` as the row has it. False if a cell is not what it says.
template <class Row>
bool cell_lease(const Row& row, bool_cells b, lock_status& out, std::uint64_t& fence)
{
    bool live = false;
    std::chrono::milliseconds ms{};
    if (!row[0] || !cell_u64(row[1], fence) || !cell_ms(row[2], ms) || !cell_bool(row[3], b, live))
        return false;
    if (live) {
        out.held = true;
        out.holder = *row[0];
        out.fencing_token = fence;
        out.ttl = ms;
    }
    return true;
}

/// `table` or `schema.table` with `suffix` added to the table, each part in `quote`s (checked
/// by the store's check_table(): no quote inside).
inline std::string quote_qualified(std::string_view table, std::string_view suffix, char quote)
{
    const std::string q(1, quote);
    std::string out;
    auto dot = table.find('.');
    if (dot != std::string_view::npos) {
        out += q + std::string(table.substr(0, dot)) + q + ".";
        table = table.substr(dot + 1);
    }
    return out + q + std::string(table) + std::string(suffix) + q;
}

}  // namespace dlock::detail
