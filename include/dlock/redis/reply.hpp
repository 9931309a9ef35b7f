// SPDX-License-Identifier: BSL-1.0
// A decoded RESP2 reply: a small tree of values owned by value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dlock::redis {

/// The RESP2 reply kinds.
enum class reply_type : std::uint8_t {
    string,
    status,
    error,
    integer,
    nil,
    array
};

/// One reply. `str` holds string, status and error text; `integer` integer replies;
/// `elements` the members of an array. Server text is untrusted data: show it, never parse
/// it for decisions beyond the documented prefixes (NOSCRIPT, WRONGPASS...).
struct reply {
    reply_type type = reply_type::nil;
    long long integer = 0;
    std::string str;
    std::vector<reply> elements;

    /// An error reply (`-ERR ...`): `str` holds the server's text.
    bool is_error() const noexcept { return type == reply_type::error; }
    /// A nil bulk string or nil array.
    bool is_nil() const noexcept { return type == reply_type::nil; }
    friend bool operator==(const reply&, const reply&) = default;
};

/// The replies to one request, one per command, in order.
using response = std::vector<reply>;

}  // namespace dlock::redis
