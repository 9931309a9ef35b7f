// SPDX-License-Identifier: BSL-1.0
// Read-write locks and semaphores on PostgreSQL without I/O: the lease-set protocol of
// src/core/lease_set.hpp (what memory_store runs and the Redis scripts follow) as PL/pgSQL
// functions over two tables, each run in the name's turn, and the decoding of their results.
#pragma once

#include <dlock/store.hpp>

#include "postgres/sql.hpp"

#include <boost/system/error_code.hpp>

#include <string>
#include <string_view>

namespace dlock::postgres::sql {

/// The owner of the marker row a set keeps in the lease table while it holds or queues
/// anyone: no token is empty (check_name), so no mutex can own it, and a mutex's acquire
/// finds the name taken and says kind_mismatch.
inline constexpr std::string_view set_marker = "";

/// The statements of the sets of one lease table: holders in `<table>_set`, waiters in
/// `<table>_set_queue`, fences from `<table>_fence`, grants by NOTIFY on grant_channel.
struct set_statements {
    std::string setup;         ///< DO-block steps: the tables and functions, if missing and allowed
    std::string acquire;       ///< ($1 name, $2 token, $3 ms, $4 listener pid or 0, $5 kind r/w/p, $6 permits)
    std::string renew;         ///< ($1, $2, $3) → (owned, contended)
    std::string release;       ///< ($1, $2, $3 "t": every lease, the operator's) → (held)
    std::string release_side;  ///< ($1, $2 'r': every reader, 'w': the writer; the operator's) → (held)
    std::string status;  ///< ($1) → holders, writer, top fence, its token, longest ms, queued, permits, last fence
};

set_statements make_set_statements(std::string_view table);

/// acquire's answer: acquired with its fence; refused with the soonest holder's remaining
/// ms; or kind_mismatch, `what` saying what the name is (-1 a mutex, 0 a read-write lock,
/// N a semaphore of N).
boost::system::error_code decode_set_acquire(const result& r, std::chrono::milliseconds ttl, acquire_result& out,
                                             long long& what);
bool decode_set_renew(const result& r, renew_result& out);
bool decode_set_release(const result& r, bool& held);
bool decode_set_status(const result& r, lock_status& out);

}  // namespace dlock::postgres::sql
