// SPDX-License-Identifier: BSL-1.0
// Read-write locks and semaphores on MariaDB without I/O: the lease-set protocol of
// src/core/lease_set.hpp (as PostgreSQL's functions run it, src/postgres/set_sql.cpp) as
// anonymous compound statements over two tables, each one transaction in the name's turn, and
// the decoding of their results. The turn is the name's row in the lease table, locked first
// (created expired if missing): a mutex's statements take the same row, so one order, no
// deadlock, and a set and a mutex never both hold a name.
#pragma once

#include <dlock/store.hpp>

#include "mariadb/sql.hpp"

#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace dlock::mariadb::sql {

/// The owner of the marker row a set keeps in the lease table while it holds or queues
/// anyone (its fence: the permits, 0 for a read-write lock): no token is empty
/// (check_token), so a mutex's acquire finds the name taken and says kind_mismatch.
inline constexpr std::string_view set_marker = "";

/// Steps of the schema setup: `<table>_set` (holders) and `<table>_set_queue` (waiters).
std::string set_setup(std::string_view table);
/// → one row (state, value): -1 kind_mismatch (value: -1 a mutex, else the set's permits; 0 a
/// read-write lock), 1 acquired (value: the fence), 0 refused (the soonest holder's remaining
/// ms, -1 if none). `listener`: the waiter's sleeper connection (0: do not queue); `kind`
/// r, w or p; `permits` 0 for a read-write lock.
std::string set_acquire(std::string_view table, std::string_view name, std::string_view token,
                        std::chrono::milliseconds ttl, std::uint64_t listener, char kind, unsigned permits);
/// → (owned 0/1, contended 0/1).
std::string set_renew(std::string_view table, std::string_view name, std::string_view token,
                      std::chrono::milliseconds ttl);
/// → (held 0/1). `force`: '0' the token's own lease; the operator's override (the token is
/// ignored): '1' every lease of the name, 'r' every reader, 'w' the writer.
std::string set_release(std::string_view table, std::string_view name, std::string_view token, char force);
/// → holders, writer 0/1, top fence, its token, longest ms, queued, permits, last fence.
std::string set_status(std::string_view table, std::string_view name);

boost::system::error_code decode_set_acquire(const result& r, std::chrono::milliseconds ttl, acquire_result& out,
                                             long long& what);
bool decode_set_renew(const result& r, renew_result& out);
bool decode_set_release(const result& r, bool& held);
bool decode_set_status(const result& r, lock_status& out);

}  // namespace dlock::mariadb::sql
