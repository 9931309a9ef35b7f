// SPDX-License-Identifier: BSL-1.0
// Decoding the latch scripts' replies (redis_scripts.hpp: count_down, latch_state).
#pragma once

#include <dlock/error.hpp>
#include <dlock/redis/reply.hpp>
#include <dlock/store.hpp>

#include "redis/script_replies.hpp"

#include <cstdint>

namespace dlock::detail {

/// count_down: {1, remaining} counted; {0, count} the latch exists with another count.
/// Numbers outside 0..max_latch_count are not ours: protocol_error.
inline boost::system::error_code decode_count_down(const redis::reply& r, std::uint64_t& remaining)
{
    long long flag = 0, value = 0;
    if (!(r.type == redis::reply_type::array && r.elements.size() == 2 && as_int(r.elements[0], flag) &&
          as_int(r.elements[1], value)))
        return error::invalid_request;
    if (value < 0 || static_cast<unsigned long long>(value) > max_latch_count)
        return error::protocol_error;
    if (flag != 1)
        return error::count_mismatch;
    remaining = static_cast<std::uint64_t>(value);
    return {};
}

/// latch_state: {count or 0, members counted}; never more members than the count.
inline boost::system::error_code decode_latch_state(const redis::reply& r, latch_state& out)
{
    long long count = 0, members = 0;
    if (!(r.type == redis::reply_type::array && r.elements.size() == 2 && as_int(r.elements[0], count) &&
          as_int(r.elements[1], members)))
        return error::invalid_request;
    if (count < 0 || members < 0 || static_cast<unsigned long long>(count) > max_latch_count || members > count)
        return error::protocol_error;
    out.count = static_cast<std::uint64_t>(count);
    out.remaining = static_cast<std::uint64_t>(count - members);
    return {};
}

}  // namespace dlock::detail
