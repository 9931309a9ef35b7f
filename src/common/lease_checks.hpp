// SPDX-License-Identifier: BSL-1.0
// A store's checks of a request before anything goes to the server, alike in the stores
// that take only mutex leases: the kind, the TTL, the name and the token.
#pragma once

#include <dlock/error.hpp>
#include <dlock/store.hpp>

#include <boost/system/error_code.hpp>

namespace dlock::detail {

/// What a lease is refused with: a kind other than mutex, a TTL the store does not keep
/// (`ttl_ok` false); success otherwise.
inline boost::system::error_code lease_refusal(lease_kind kind, bool ttl_ok)
{
    if (kind != lease_kind::mutex)
        return error::not_supported;
    return ttl_ok ? boost::system::error_code() : boost::system::error_code(error::invalid_lease);
}

/// The first of a name's and a token's checks that failed (success: both passed).
inline boost::system::error_code key_refusal(boost::system::error_code name, boost::system::error_code token)
{
    return name ? name : token;
}

}  // namespace dlock::detail
