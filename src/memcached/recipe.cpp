// SPDX-License-Identifier: BSL-1.0
#include "memcached/recipe.hpp"

#include <dlock/error.hpp>

#include <charconv>

namespace dlock::memcached::recipe {

using boost::system::error_code;

bool valid_ttl(std::chrono::milliseconds ttl) noexcept
{
    return ttl >= min_ttl && ttl <= max_ttl && ttl.count() % granularity.count() == 0;
}

std::string ttl_flag(std::chrono::milliseconds ttl)
{
    return "T" + std::to_string(ttl.count() / 1000 + 1);
}

std::string value(const std::string& token, std::uint64_t fence)
{
    return token + " " + std::to_string(fence);
}

error_code read_lock(const proto::reply& r, lock_view& out)
{
    out = lock_view{};
    if (r.k == proto::reply::kind::en)
        return {};
    if (auto ec = error_of(r))
        return ec;
    if (r.k != proto::reply::kind::va)
        return error::invalid_request;
    auto sp = r.data.rfind(' ');
    if (sp == std::string::npos || sp == 0)
        return error::invalid_request;  // not a lock item: another program wrote the key
    std::uint64_t fence = 0;
    const char* b = r.data.data() + sp + 1;
    const char* e = r.data.data() + r.data.size();
    auto [p, fec] = std::from_chars(b, e, fence);
    auto cas = r.number('c');
    // Fence 0: an item being taken, its fence not set yet (acquire_steps).
    if (fec != std::errc() || p != e || !cas)
        return error::invalid_request;
    out.present = true;
    out.owner = r.data.substr(0, sp);
    out.fence = fence;
    out.cas = *cas;
    out.ttl_s = r.number('t').value_or(-1);
    return {};
}

std::chrono::milliseconds holder_ttl(const lock_view& v) noexcept
{
    if (!v.present || v.ttl_s < 0)
        return std::chrono::milliseconds(-1);
    return std::chrono::milliseconds(std::max<long long>(v.ttl_s - 1, 0) * 1000);
}

error_code read_counter(const proto::reply& r, std::uint64_t& out)
{
    if (auto ec = error_of(r))
        return ec;
    if (r.k != proto::reply::kind::va)
        return error::invalid_request;
    auto [p, ec] = std::from_chars(r.data.data(), r.data.data() + r.data.size(), out);
    if (ec != std::errc() || p != r.data.data() + r.data.size() || out < 1)
        return error::invalid_request;
    return {};
}

error_code error_of(const proto::reply& r)
{
    switch (r.k) {
    case proto::reply::kind::error: return error::protocol_error;
    case proto::reply::kind::client_error: return error::invalid_request;
    case proto::reply::kind::server_error: return error::server_busy;
    default: return {};
    }
}

}  // namespace dlock::memcached::recipe
