// SPDX-License-Identifier: BSL-1.0
// Elections and count-down latches on MariaDB without I/O. An election is a mutex lease on
// the name's row with the proclaimed value in its `value` column (counted only while the
// lease that wrote it owns the row); a latch is a row of `<table>_latch` with one row per
// member in `<table>_latch_member`, counted in one transaction in the latch's turn (its row,
// locked). Proclaims, a new leader and the last count-down ring the bell.
#pragma once

#include <dlock/store.hpp>

#include "mariadb/sql.hpp"

#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace dlock::mariadb::sql {

/// Steps of the schema setup: the value columns (added if missing and allowed) and the
/// latch tables.
std::string election_latch_setup(std::string_view table);
/// An election's acquire: the mutex's, then a ring when a new leader drew its fence.
std::string leader_acquire(std::string_view table, std::string_view name, std::string_view token,
                           std::chrono::milliseconds ttl);
/// → (written 0/1): only the live owner writes.
std::string proclaim(std::string_view table, std::string_view name, std::string_view token, std::string_view value);
/// → owner, fence, remaining ms, live, queued, value (NULL: none proclaimed by this lease); or no row.
std::string leader(std::string_view table, std::string_view name);
/// → (counted 0/1, remaining or, not counted, the latch's own count).
std::string count_down(std::string_view table, std::string_view name, std::string_view member, std::uint64_t count,
                       std::chrono::milliseconds ttl);
/// → (count, members) of a live latch; or no row.
std::string latch_read(std::string_view table, std::string_view name);

bool decode_proclaim(const result& r, bool& written);
bool decode_leader(const result& r, lock_status& out);
/// count_mismatch with `remaining` the latch's count; protocol_error if malformed.
boost::system::error_code decode_count_down(const result& r, std::uint64_t& remaining);
bool decode_latch_state(const result& r, dlock::latch_state& out);

}  // namespace dlock::mariadb::sql
