// SPDX-License-Identifier: BSL-1.0
// The PostgreSQL recipe without I/O: the statements (parameters bound, never spliced), the
// decoding of their results, and the mapping of server errors onto dlock's codes.
#pragma once

#include <dlock/store.hpp>

#include <boost/system/error_code.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::postgres::sql {

/// One row in libpq's text format (nullopt: SQL NULL).
using row = std::vector<std::optional<std::string>>;

/// What one query gave back: the rows of its last row-returning result, or its error.
struct result {
    std::vector<row> rows;
    std::string sqlstate;  ///< of the error; empty if none
    std::string message;   ///< the server's text of the error
};

/// The statements for one lease table and its hand-off queue. Parameters: $1 name, $2 lease
/// token, $3 lease in ms, $4 the waiter's listening backend pid (0: do not queue).
struct statements {
    std::string setup;    ///< simple query: the tables, the sequence and new columns, if missing
    std::string acquire;  ///< ($1..$4) → (ours, fence, remaining ms); marks a held lease contended, queues
    std::string renew;    ///< ($1, $2, $3) → one row (was contended) if still ours
    std::string release;  ///< ($1, $2) → (was live, notices, raced); hands on or frees; withdraws a queued token
    std::string force_release;  ///< ($1) → as release, whoever holds it
    std::string status;         ///< ($1) → owner, fence, remaining ms, live, queued, last fence issued
    std::string proclaim;       ///< ($1, $2, $3 value) → (written); an election's value, NOTIFY `dlock` if written
    std::string leader;         ///< ($1) → as status, then the proclaimed value
    std::string count_down;     ///< ($1 name, $2 member, $3 count, $4 ttl ms) → (counted, remaining or the count)
    std::string latch_state;    ///< ($1) → (count, members) of a live latch; no row if none
};

/// What a hand-off's NOTIFY (on grant_channel) says: the name, the token it went to, its lease.
struct grant {
    std::string name;
    std::string token;
    grant_notice notice;
};

/// What a release did.
struct release_outcome {
    bool held = false;   ///< the lease was ours (or, forced, anyone's) and live
    bool raced = false;  ///< a withdrawn token was handed the name meanwhile: release it again
                         ///< (forced: a set's marker holds the name)
};

/// The NOTIFY channel of releases (one for every table: a payload is a lock name).
inline constexpr std::string_view channel = "dlock";
/// The NOTIFY channel of hand-offs: "<fence> <ttl ms> <token bytes> <token><name>".
inline constexpr std::string_view grant_channel = "dlock_grant";
/// The longest name taken (a btree key must stay well under 2704 bytes).
inline constexpr std::size_t max_name = 2000;

/// `"schema"."name"` from a table name checked by check_table().
std::string quote_table(std::string_view table);
/// The fencing sequence of `table`, quoted: `"schema"."name_fence"`.
std::string quote_sequence(std::string_view table);
/// The hand-off queue of `table`, quoted: `"schema"."name_queue"`.
std::string quote_queue(std::string_view table);
/// The latches of `table`, their members and the count-down function, quoted:
/// `"schema"."name_latch"`, `"schema"."name_latch_member"`, `"schema"."name_count_down"`.
std::string quote_latch(std::string_view table);
std::string quote_latch_member(std::string_view table);
std::string quote_count_down(std::string_view table);
statements make_statements(std::string_view table);
/// A DO-block step that runs `create` if `check` (an SQL expression) IS NULL, and lets a
/// failure pass: what only an optional feature needs (a latch's, a set's objects).
std::string create_optional(const std::string& check, const std::string& create);
/// LISTEN on the release and hand-off channels.
std::string listen();
/// A grant_channel payload; false if it is not one of ours.
bool decode_grant(std::string_view payload, grant& out);

/// invalid_name for names (and tokens) PostgreSQL cannot take as text: empty, a NUL byte, too long.
boost::system::error_code check_name(std::string_view name);

/// A query's error (by SQLSTATE) as a dlock error; success if it has none.
boost::system::error_code error_of(const result& r);
/// A failed connect (libpq's message: no SQLSTATE there) as a dlock error.
boost::system::error_code connect_error_of(std::string_view message);

/// Each false if the result does not have the statement's shape (protocol_error).
/// `set_permits`: the name is a read-write lock's (0) or a semaphore's of N permits (its
/// marker row holds it), which a mutex may not take.
bool decode_acquire(const result& r, std::chrono::milliseconds ttl, acquire_result& out,
                    std::optional<std::uint64_t>& set_permits);
bool decode_renew(const result& r, renew_result& out);
bool decode_release(const result& r, release_outcome& out);
bool decode_status(const result& r, lock_status& out);
bool decode_proclaim(const result& r, bool& written);
/// count_mismatch (and `remaining` = the latch's count) when the latch has another count.
boost::system::error_code decode_count_down(const result& r, std::uint64_t& remaining);
bool decode_latch_state(const result& r, latch_state& out);
/// status, and an election's value (lock_status::value: none until proclaimed).
bool decode_leader(const result& r, lock_status& out);

}  // namespace dlock::postgres::sql
