// SPDX-License-Identifier: BSL-1.0
#include "redis/reply_errors.hpp"

#include <dlock/error.hpp>

#include <array>
#include <utility>

namespace dlock::detail {

namespace {

bool starts_with_word(std::string_view text, std::string_view word) noexcept
{
    return text.substr(0, word.size()) == word && (text.size() == word.size() || text[word.size()] == ' ');
}

// Redis 6 wraps a script's failed call: "ERR Error running script (call to f_…):
// @user_script:3: WRONGTYPE …". Redis 7 passes the call's error through as is.
std::string_view unwrap_script_error(std::string_view text) noexcept
{
    if (text.rfind("ERR Error running script", 0) != 0)
        return text;
    auto at = text.find("@user_script:");
    if (at == std::string_view::npos)
        return text;
    auto colon = text.find(": ", at);
    return colon == std::string_view::npos ? text : text.substr(colon + 2);
}

}  // namespace

boost::system::error_code error_from_reply(std::string_view text) noexcept
{
    text = unwrap_script_error(text);
    if (starts_with_word(text, "NOPERM"))
        return error::permission_denied;
    if (starts_with_word(text, "WRONGTYPE"))
        return error::wrong_type;
    static constexpr std::array<std::string_view, 6> busy{"LOADING",    "BUSY",        "TRYAGAIN",
                                                          "MASTERDOWN", "CLUSTERDOWN", "READONLY"};
    for (auto word : busy)
        if (starts_with_word(text, word))
            return error::server_busy;
    // The slot began to move between a script's routing and its first command (a key that
    // expired in between): nothing ran, and the next attempt is redirected.
    if (text.find("Script attempted to access a non local key") != std::string_view::npos)
        return error::server_busy;
    // Only our ttl argument is a number the scripts hand to PEXPIRE.
    if (text.rfind("ERR invalid expire time", 0) == 0 ||
        text.rfind("ERR value is not an integer or out of range", 0) == 0)
        return error::invalid_lease;
    return error::server_error;
}

}  // namespace dlock::detail
