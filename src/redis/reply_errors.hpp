// SPDX-License-Identifier: BSL-1.0
// Server error replies to dlock error codes: one table for every Redis store, so that an
// ACL refusal or a foreign key type stops a lock the same way whichever store met it.
#pragma once

#include <dlock/error.hpp>
#include <dlock/redis/reply.hpp>

#include <boost/system/error_code.hpp>

#include <string>
#include <string_view>

namespace dlock::detail {

/// The code for an error reply's text: NOPERM → permission_denied, WRONGTYPE → wrong_type,
/// LOADING/BUSY/TRYAGAIN/MASTERDOWN/CLUSTERDOWN/READONLY → server_busy, a rejected expire
/// time → invalid_lease, anything else → server_error. Reads the error inside a Redis 6
/// "Error running script" wrapper too.
boost::system::error_code error_from_reply(std::string_view text) noexcept;

/// What a refused script call adds to the server's text: the way out is Redis's to name,
/// not the error code's (whose message every store shares).
inline constexpr std::string_view no_scripting_hint =
    " (a user that may not run Lua scripts: redis_store_options::scripting = false, dlock --no-scripting)";

/// The server's text of a refused script call, with the way out.
inline std::string refused_script_text(std::string_view text)
{
    return std::string(text) + std::string(no_scripting_hint);
}

/// One script call's failure as a store reports it: a server error reply becomes its code
/// and its text goes to `keep` (the store's set_error_text); other failures pass unchanged.
template <class Keep>
boost::system::error_code script_failure(boost::system::error_code ec, const redis::reply& r, Keep&& keep)
{
    if (!r.is_error())
        return ec;
    ec = error_from_reply(r.str);
    keep(ec == error::permission_denied ? refused_script_text(r.str) : r.str);
    return ec;
}

}  // namespace dlock::detail
