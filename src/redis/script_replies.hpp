// Decoding the lock scripts' replies: shared by every store that runs them (redis_store,
// cluster_store), so a reply means the same thing whichever store got it.
#pragma once

#include <dlock/error.hpp>
#include <dlock/redis/reply.hpp>
#include <dlock/store.hpp>

#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>

namespace dlock::detail {

inline bool as_int(const redis::reply& r, long long& out)
{
    if (r.type != redis::reply_type::integer)
        return false;
    out = r.integer;
    return true;
}

/// The acquire script: {1, fencing token} when taken (the lease is `ttl`), {0, holder's
/// PTTL} when not. Another shape is error::invalid_request.
inline boost::system::error_code decode_acquire(const redis::reply& r, std::chrono::milliseconds ttl,
                                                acquire_result& out)
{
    long long flag = 0, value = 0;
    if (!(r.type == redis::reply_type::array && r.elements.size() == 2 && as_int(r.elements[0], flag) &&
          as_int(r.elements[1], value)))
        return error::invalid_request;
    out = acquire_result{};
    out.acquired = flag == 1;
    if (out.acquired) {
        out.fencing_token = static_cast<std::uint64_t>(value);
        out.holder_ttl = ttl;
    } else {
        out.holder_ttl = std::chrono::milliseconds(value);
    }
    return {};
}

/// The status script: {holder or nil, fence, PTTL, counter}.
inline boost::system::error_code decode_status(const redis::reply& r, lock_status& out)
{
    long long fence = 0, pttl = 0, counter = 0, queued = 0;
    // Four elements, or five with the direct hand-off queue's length.
    if (!(r.type == redis::reply_type::array && (r.elements.size() == 4 || r.elements.size() == 5) &&
          as_int(r.elements[1], fence) && as_int(r.elements[2], pttl) && as_int(r.elements[3], counter) &&
          (r.elements.size() == 4 || as_int(r.elements[4], queued))))
        return error::invalid_request;
    out = lock_status{};
    out.held = r.elements[0].type == redis::reply_type::string;
    out.holder = r.elements[0].str;
    out.fencing_token = static_cast<std::uint64_t>(fence);
    out.ttl = std::chrono::milliseconds(pttl < 0 ? -1 : pttl);
    out.last_fencing_token = static_cast<std::uint64_t>(counter);
    out.queued = static_cast<std::size_t>(queued < 0 ? 0 : queued);
    return {};
}

}  // namespace dlock::detail
