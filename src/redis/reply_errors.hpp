// SPDX-License-Identifier: BSL-1.0
// Server error replies to dlock error codes: one table for every Redis store, so that an
// ACL refusal or a foreign key type stops a lock the same way whichever store met it.
#pragma once

#include <dlock/redis/reply.hpp>

#include <boost/system/error_code.hpp>

#include <string_view>

namespace dlock::detail {

/// The code for an error reply's text: NOPERM → permission_denied, WRONGTYPE → wrong_type,
/// LOADING/BUSY/TRYAGAIN/MASTERDOWN/CLUSTERDOWN/READONLY → server_busy, a rejected expire
/// time → invalid_lease, anything else → server_error. Reads the error inside a Redis 6
/// "Error running script" wrapper too.
boost::system::error_code error_from_reply(std::string_view text) noexcept;

/// One script call's failure as a store reports it: a server error reply becomes its code
/// and its text goes to `keep` (the store's set_error_text); other failures pass unchanged.
template <class Keep>
boost::system::error_code script_failure(boost::system::error_code ec, const redis::reply& r, Keep&& keep)
{
    if (!r.is_error())
        return ec;
    keep(r.str);
    return error_from_reply(r.str);
}

}  // namespace dlock::detail
