// SPDX-License-Identifier: BSL-1.0
// The MariaDB recipe without I/O: the statements of each operation (one multi-statement round
// trip each; names and tokens as hex literals), the decoding of their results, and server
// error numbers mapped onto dlock's codes.
#pragma once

#include <dlock/store.hpp>

#include <boost/system/error_code.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::mariadb::sql {

/// One row in the text protocol (nullopt: SQL NULL).
using row = std::vector<std::optional<std::string>>;

/// What one multi-statement query gave back: the rows of each statement that returned a
/// result set, in order, or the error that stopped it.
struct result {
    std::vector<std::vector<row>> sets;
    unsigned errnum = 0;   ///< the server's (or the client library's) error number; 0 if none
    std::string sqlstate;  ///< of the error
    std::string message;   ///< the server's text of the error
};

/// The longest name taken (an InnoDB key stays under 3072 bytes) and the longest token.
inline constexpr std::size_t max_name = 2000;
inline constexpr std::size_t max_token = 255;

/// `X'..'`: bytes as a hex literal. Its alphabet is [0-9A-F], so no character set, sql_mode
/// (NO_BACKSLASH_ESCAPES) or byte value (quotes, backslashes, NUL) can end it early.
std::string hex_literal(std::string_view bytes);
/// `` `db`.`name` `` from a table name checked by check_table().
std::string quote_table(std::string_view table);
/// The fencing sequence of `table`, quoted: `` `db`.`name_fence` ``.
std::string quote_sequence(std::string_view table);
/// The mutex's hand-off queue `<table>_queue`, quoted.
std::string quote_queue(std::string_view table);
/// The expression naming `name`'s signal lock for GET_LOCK: 'dlock:' + 58 hex digits of
/// SHA2(database.table/name), as named locks are server-wide and at most 64 characters.
std::string signal_lock(std::string_view table, std::string_view name);

/// Run on every connection after connect: strict sql_mode (nothing is ever truncated).
std::string session_setup();
/// Creates the table and the sequence if missing (checked first, so that a user without
/// CREATE works on existing ones); on the main connection after the session setup.
std::string schema_setup(std::string_view table);

/// → set 0: one row (ours 0/1, fence, holder's remaining ms, holder has its signal lock 0/1,
/// a set's marker 0/1), or none if the row went away meanwhile. `ring_new`: an election's,
/// whose new leader rings the bell.
std::string acquire(std::string_view table, std::string_view name, std::string_view token,
                    std::chrono::milliseconds ttl, bool ring_new = false, std::uint64_t listener = 0);
/// → set 0: (NULL if not ours any more, else whether it was contended 0/1); set 1: the reconcile.
std::string renew(std::string_view table, std::string_view name, std::string_view token, std::chrono::milliseconds ttl);
/// → set 0: one row (was live 0/1) if the lease was ours (handed to the first live queued
/// waiter, else deleted), none otherwise (the token's place in the queue withdrawn); set 1:
/// the reconcile.
std::string release(std::string_view table, std::string_view name, std::string_view token);
/// → set 0: one row (was live) if there was a mutex's lease; set 1: the reconcile; set 2: a
/// set's marker holds the name 0/1.
std::string force_release(std::string_view table, std::string_view name);
/// → set 0: owner, fence, remaining ms, live 0/1, live queued waiters; or no row.
std::string status(std::string_view table, std::string_view name);
/// The live queued waiters of the row `t`'s name, as a scalar subquery.
std::string queued_count(std::string_view table);
/// Blocks until the holder gives `name`'s signal lock back or `timeout` passes, then gives
/// it back at once → set 0: (1 if it was had, 0 on timeout, NULL on error).
std::string wait(std::string_view table, std::string_view name, std::chrono::milliseconds timeout);

/// invalid_name unless 1..max_name bytes (names) or 1..max_token (tokens); any byte is fine.
boost::system::error_code check_name(std::string_view name);
boost::system::error_code check_token(std::string_view token);

/// A server or client-library error number as a dlock error; success for 0.
boost::system::error_code error_of(unsigned errnum);

/// What a refused acquire learnt about the holder.
struct holder_info {
    std::chrono::milliseconds remaining{-1};
    bool signal = false;  ///< the holder's connection has the name's signal lock: a GET_LOCK wait will end with it
};

/// Each false if the result does not have the statement's shape (protocol_error).
/// decode_acquire: `set_permits` is set when a set's marker holds the name (its permits, 0 a
/// read-write lock).
bool decode_acquire(const result& r, std::chrono::milliseconds ttl, acquire_result& out, holder_info& holder,
                    std::optional<std::uint64_t>& set_permits);
bool decode_renew(const result& r, renew_result& out);
bool decode_release(const result& r, bool& out);
/// `marker`: a set holds the name (its own release frees it).
bool decode_force_release(const result& r, bool& out, bool& marker);
bool decode_status(const result& r, lock_status& out);
/// `released`: the wait had the signal lock (its holder gave it back, or had gone).
bool decode_wait(const result& r, bool& released);

}  // namespace dlock::mariadb::sql
