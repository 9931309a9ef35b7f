// SPDX-License-Identifier: BSL-1.0
// Sans-io: the lock recipe over memcached's meta commands. The lock item holds
// "<token> <fence>"; its TTL is the lease plus one second (memcached's clock ticks in whole
// seconds, so an item may expire up to a second early; the extra second keeps it alive for
// at least the lease the holder counts on).
#pragma once

#include <dlock/store.hpp>

#include "memcached/protocol.hpp"

#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <string>

namespace dlock::memcached::recipe {

/// Leases the store accepts: whole seconds, 2 s (a 1 s TTL may expire at once) up to 30
/// days minus the extra second (memcached reads a longer relative TTL as a unix time).
inline constexpr std::chrono::milliseconds min_ttl{2'000};
inline constexpr std::chrono::milliseconds max_ttl{(30LL * 24 * 3600 - 1) * 1000};
inline constexpr std::chrono::milliseconds granularity{1'000};
bool valid_ttl(std::chrono::milliseconds ttl) noexcept;

/// The TTL flag for a lease: "T<seconds + 1>".
std::string ttl_flag(std::chrono::milliseconds ttl);

/// The lock item's value.
std::string value(const std::string& token, std::uint64_t fence);

/// What `mg <lock> v c t` says.
struct lock_view {
    bool present = false;
    std::string owner;
    std::uint64_t fence = 0;
    long long cas = 0;
    long long ttl_s = -1;  ///< remaining seconds as memcached counts them; -1 none/unknown
};
/// EN → absent; VA "<token> <fence>" with c and t → present (fence 0: being taken, its
/// fence not set yet). Anything else is an error.
boost::system::error_code read_lock(const proto::reply& r, lock_view& out);

/// The holder's remaining lease as a waiter should sleep on it: memcached's remaining
/// seconds minus the extra second (the lease the holder was given), never negative; -1 if
/// unknown.
std::chrono::milliseconds holder_ttl(const lock_view& v) noexcept;

/// The counter from `ma <fence> N0 J1 v` (VA with a decimal number ≥ 1).
boost::system::error_code read_counter(const proto::reply& r, std::uint64_t& out);

/// An error reply's code: ERROR (not the meta protocol) → protocol_error; CLIENT_ERROR →
/// invalid_request; SERVER_ERROR (out of memory, too large) → server_busy; other kinds are
/// not errors (success).
boost::system::error_code error_of(const proto::reply& r);

}  // namespace dlock::memcached::recipe
