// SPDX-License-Identifier: BSL-1.0
/// @file
/// A decoded RESP2 reply: a small tree of values owned by value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dlock::redis {

/// The RESP2 reply kinds.
enum class reply_type : std::uint8_t {
    string,   ///< a bulk string (`$`)
    status,   ///< a simple string (`+OK`)
    error,    ///< an error reply (`-ERR ...`)
    integer,  ///< an integer (`:`)
    nil,      ///< a nil bulk string or nil array
    array     ///< an array (`*`)
};

/// One reply. `str` holds string, status and error text; `integer` integer replies;
/// `elements` the members of an array. Server text is untrusted data: show it, never parse
/// it for decisions beyond the documented prefixes (NOSCRIPT, WRONGPASS...).
/// @threadsafety A plain value: distinct objects may be used from distinct threads.
struct reply {
    reply_type type = reply_type::nil;  ///< which kind of reply
    long long integer = 0;              ///< an integer reply's value
    std::string str;                    ///< a string, status or error reply's text
    std::vector<reply> elements;        ///< an array's members

    /// An error reply (`-ERR ...`): `str` holds the server's text.
    bool is_error() const noexcept { return type == reply_type::error; }
    /// A nil bulk string or nil array.
    bool is_nil() const noexcept { return type == reply_type::nil; }
    /// Equal when every field is.
    friend bool operator==(const reply&, const reply&) = default;
};

/// The replies to one request, one per command, in order.
using response = std::vector<reply>;

}  // namespace dlock::redis
