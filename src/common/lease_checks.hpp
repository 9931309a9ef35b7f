// SPDX-License-Identifier: BSL-1.0
// A store's checks of a request before anything goes to the server, alike across stores:
// the kind (stores that take only mutex leases), the TTL, the name and the token, a
// count-down's count and member.
#pragma once

#include <dlock/error.hpp>
#include <dlock/store.hpp>

#include <boost/system/error_code.hpp>

#include <cstdint>
#include <string>

namespace dlock::detail {

/// What a lease is refused with: a kind other than mutex, a TTL the store does not keep
/// (`ttl_ok` false); success otherwise.
inline boost::system::error_code lease_refusal(lease_kind kind, bool ttl_ok)
{
    if (kind != lease_kind::mutex)
        return error::not_supported;
    return ttl_ok ? boost::system::error_code() : boost::system::error_code(error::invalid_lease);
}

/// A count-down's own checks: a count of 1..max_latch_count and a member (invalid_option).
inline boost::system::error_code count_down_refusal(std::uint64_t count, const std::string& member)
{
    if (count == 0 || count > max_latch_count || member.empty())
        return error::invalid_option;
    return {};
}

/// The first of a name's and a token's checks that failed (success: both passed).
inline boost::system::error_code key_refusal(boost::system::error_code name, boost::system::error_code token)
{
    return name ? name : token;
}

}  // namespace dlock::detail
