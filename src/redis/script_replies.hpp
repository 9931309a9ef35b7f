// SPDX-License-Identifier: BSL-1.0
// Decoding the lock scripts' replies: shared by every store that runs them (redis_store,
// cluster_store, and redlock_store through its nodes), so a reply means the same thing
// whichever store got it.
#pragma once

#include <dlock/error.hpp>
#include <dlock/redis/reply.hpp>
#include <dlock/store.hpp>

#include "core/kind_text.hpp"
#include "redis/reply_errors.hpp"

#include <boost/system/error_code.hpp>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace dlock::detail {

/// The longest lease the scripts set: Redis refuses a PEXPIRE whose deadline overflows
/// (now + ttl past 2^63 ms), and the queue's expiry adds two leases in Lua doubles (exact
/// to 2^53). 2^46 ms (about 2,200 years) stays far from both.
inline constexpr std::chrono::milliseconds redis_max_ttl{std::int64_t{1} << 46};

/// A lease the scripts can set: 1 ms up to redis_max_ttl.
inline bool valid_redis_ttl(std::chrono::milliseconds ttl) noexcept
{
    return ttl.count() >= 1 && ttl <= redis_max_ttl;
}

/// A grant message, "<fence> <ttl_ms>": a positive fence and a TTL the scripts can set, in
/// decimal, nothing else; anything else is not ours to trust. from_chars: it is on the
/// waiter's hand-off path, where a stream cost ~2,000 instructions (locale, allocation).
inline bool parse_grant(std::string_view payload, grant_notice& g)
{
    std::uint64_t fence = 0;
    std::int64_t ttl = 0;
    const char* end = payload.data() + payload.size();
    auto [p, ec] = std::from_chars(payload.data(), end, fence);
    if (ec != std::errc() || p == end || *p != ' ')
        return false;
    auto [q, ec2] = std::from_chars(p + 1, end, ttl);
    if (ec2 != std::errc() || q != end || fence < 1 || !valid_redis_ttl(std::chrono::milliseconds(ttl)))
        return false;
    g.fencing_token = fence;
    g.ttl = std::chrono::milliseconds(ttl);
    return true;
}

inline bool as_int(const redis::reply& r, long long& out)
{
    if (r.type != redis::reply_type::integer)
        return false;
    out = r.integer;
    return true;
}

/// The acquire scripts' {-1, what}: the name is in use as another primitive; `what` is
/// -1 for a mutex, 0 for a read-write lock, N for a semaphore of N permits.
inline std::string script_kind_text(long long what)
{
    if (what < 0)
        return kind_in_use_text(lease_kind::mutex);
    return what == 0 ? kind_in_use_text(lease_kind::read)
                     : kind_in_use_text(lease_kind::permit, static_cast<unsigned long long>(what));
}

/// The acquire script: {1, fencing token} when taken (the lease is `ttl`), {0, holder's
/// PTTL} when not, {-1, what} for a name in use as another primitive (error::kind_mismatch).
/// Another shape is error::invalid_request; a token below 1 (the counter starts at 1 and
/// only grows) is error::protocol_error, never a huge unsigned.
inline boost::system::error_code decode_acquire(const redis::reply& r, std::chrono::milliseconds ttl,
                                                acquire_result& out)
{
    long long flag = 0, value = 0;
    if (!(r.type == redis::reply_type::array && r.elements.size() == 2 && as_int(r.elements[0], flag) &&
          as_int(r.elements[1], value)))
        return error::invalid_request;
    out = acquire_result{};
    if (flag == -1)
        return error::kind_mismatch;
    out.acquired = flag == 1;
    if (out.acquired) {
        if (value < 1)
            return error::protocol_error;
        out.fencing_token = static_cast<std::uint64_t>(value);
        out.granted_ttl = ttl;
    } else {
        out.holder_ttl = std::chrono::milliseconds(value < 0 ? -1 : value);
    }
    return {};
}

/// decode_acquire, and a kind_mismatch's text naming what the name is goes to `keep`.
template <class Keep>
boost::system::error_code decode_acquire(const redis::reply& r, std::chrono::milliseconds ttl, acquire_result& out,
                                         Keep& keep)
{
    auto ec = decode_acquire(r, ttl, out);
    if (ec == error::kind_mismatch)
        keep(script_kind_text(r.elements[1].integer));
    return ec;
}

/// The renew script: 0 not ours, 1 ours, 2 ours and contended.
inline boost::system::error_code decode_renew(const redis::reply& r, renew_result& out)
{
    long long v = 0;
    if (!as_int(r, v))
        return error::invalid_request;
    out = renew_result{v >= 1, v == 2};
    return {};
}

/// The release scripts: 1 if the lease (or, forced, any lease) was freed.
inline boost::system::error_code decode_release(const redis::reply& r, bool& out)
{
    long long v = 0;
    if (!as_int(r, v))
        return error::invalid_request;
    out = v == 1;
    return {};
}

/// The status script: {holder or nil, fence, PTTL, counter[, queued]}. Negative fences or
/// counters are error::protocol_error.
inline boost::system::error_code decode_status(const redis::reply& r, lock_status& out)
{
    long long fence = 0, pttl = 0, counter = 0, queued = 0;
    // Four elements, or five with the direct hand-off queue's length.
    if (!(r.type == redis::reply_type::array && (r.elements.size() == 4 || r.elements.size() == 5) &&
          as_int(r.elements[1], fence) && as_int(r.elements[2], pttl) && as_int(r.elements[3], counter) &&
          (r.elements.size() == 4 || as_int(r.elements[4], queued))))
        return error::invalid_request;
    if (fence < 0 || counter < 0)
        return error::protocol_error;
    out = lock_status{};
    out.held = r.elements[0].type == redis::reply_type::string;
    out.holder = r.elements[0].str;
    out.fencing_token = static_cast<std::uint64_t>(fence);
    out.ttl = std::chrono::milliseconds(pttl < 0 ? -1 : pttl);
    out.last_fencing_token = static_cast<std::uint64_t>(counter);
    out.queued = static_cast<std::size_t>(queued < 0 ? 0 : queued);
    return {};
}

/// The leader script: the status script's four fields, then the value (nil: nothing
/// proclaimed).
inline boost::system::error_code decode_leader(const redis::reply& r, lock_status& out)
{
    if (r.type != redis::reply_type::array || r.elements.size() != 5)
        return error::invalid_request;
    redis::reply head = r;
    head.elements.pop_back();
    auto ec = decode_status(head, out);
    if (!ec && r.elements[4].type == redis::reply_type::string)
        out.value = r.elements[4].str;
    return ec;
}

/// The read-write lock's and semaphore's status script: {holder or nil, fence, longest
/// remaining ms, counter, queued, holders, writer 0/1, permits}.
inline boost::system::error_code decode_set_status(const redis::reply& r, lock_status& out)
{
    long long fence = 0, left = 0, counter = 0, queued = 0, holders = 0, writer = 0, permits = 0;
    if (!(r.type == redis::reply_type::array && r.elements.size() == 8 && as_int(r.elements[1], fence) &&
          as_int(r.elements[2], left) && as_int(r.elements[3], counter) && as_int(r.elements[4], queued) &&
          as_int(r.elements[5], holders) && as_int(r.elements[6], writer) && as_int(r.elements[7], permits)))
        return error::invalid_request;
    if (fence < 0 || counter < 0 || holders < 0 || permits < 0 || permits > 0xffffffffLL)
        return error::protocol_error;
    out = lock_status{};
    out.held = holders > 0;
    out.holder = r.elements[0].str;
    out.fencing_token = static_cast<std::uint64_t>(fence);
    out.ttl = std::chrono::milliseconds(left < 0 ? -1 : left);
    out.last_fencing_token = static_cast<std::uint64_t>(counter);
    out.queued = static_cast<std::size_t>(queued < 0 ? 0 : queued);
    out.holders = static_cast<std::size_t>(holders);
    out.writer = writer == 1;
    out.capacity = static_cast<unsigned>(permits);
    out.kind = permits > 0 ? lease_kind::permit : lease_kind::read;
    return {};
}

/// One script call's outcome as a store completes it: the connection's error (a server
/// error reply mapped by script_failure, its text to `keep`), else `decode`'s verdict.
template <class Result, class Decode, class Keep>
boost::system::error_code finish_script(boost::system::error_code ec, const redis::reply& r, Result& out,
                                        Decode&& decode, Keep&& keep)
{
    if (ec)
        ec = script_failure(ec, r, keep);
    else if constexpr (std::is_invocable_v<Decode&, const redis::reply&, Result&, Keep&>)
        ec = decode(r, out, keep);  // a decoder with something to say (kind_mismatch's text)
    else
        ec = decode(r, out);
    if (ec)
        out = Result{};  // a half-decoded reply says nothing
    return ec;
}

}  // namespace dlock::detail
