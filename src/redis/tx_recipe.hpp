// SPDX-License-Identifier: BSL-1.0
// Sans-io: redis_store's lock without Lua, as WATCH/MULTI/EXEC optimistic transactions over
// the same keys as the scripts (redis_scripts.hpp). Each operation is a read (UNWATCH, WATCH,
// reads) then, if the reads call for a change, a write (MULTI ... EXEC) that Redis runs only
// if no watched key changed in between; a nil EXEC is a conflict and the caller starts over.
// Both requests must go out on the same connection (connection::async_exec_pinned), one
// transaction at a time: WATCH belongs to the connection.
#pragma once

#include <dlock/redis/reply.hpp>
#include <dlock/redis/request.hpp>
#include <dlock/store.hpp>

#include <boost/system/error_code.hpp>

#include <chrono>
#include <string>

namespace dlock::redis::tx {

/// The keys and channel of one name (redis::detail::keys gives them).
struct names {
    std::string lock;      ///< hash {owner, fence[, contended]}; the lease is its PX expiry; or {set}:
                           ///< the name is a read-write lock's or a semaphore's (set_scripts.hpp)
    std::string fence;     ///< the fencing counter (never expires)
    std::string released;  ///< the channel a release publishes `released` on
    std::string queue;     ///< the Lua mode's hand-off queue (status only: its length)
};

/// What the reads decided.
template <class Result>
struct plan {
    boost::system::error_code ec;  ///< the reads had an unexpected shape, or the name is another kind
    std::string why;               ///< with ec: the store's text of it (kind_mismatch: what the name is)
    bool done = false;             ///< `result` is final: nothing to write
    Result result{};               ///< final if `done`, else the result once `write` commits
    request write;                 ///< MULTI ... EXEC (empty if done)
    long long new_fence = 0;       ///< acquire of a free name: what the INCR must return
};

/// How a write ended.
enum class outcome {
    committed,  ///< EXEC ran the transaction
    conflict,   ///< EXEC returned nil: a watched key changed; read again
    failed,     ///< the replies have an unexpected shape (`ec` says which)
};

/// acquire: UNWATCH; WATCH lock fence; HMGET lock owner fence contended set; PTTL lock; GET fence.
request read_acquire(const names& k);
/// Free: INCR fence (watched, so it gives counter + 1), HSET owner/fence, PEXPIRE. Ours:
/// PEXPIRE, same fence. Another owner's: HSET contended (unless already set) and report
/// its PTTL. Marked `set` by a read-write lock or a semaphore: error::kind_mismatch, done.
/// `ttl` is the lease asked for.
plan<acquire_result> plan_acquire(const response& reads, const names& k, const std::string& token,
                                  std::chrono::milliseconds ttl);
/// The EXEC of plan_acquire's write; fills `out` when committed.
outcome finish_acquire(const response& written, const plan<acquire_result>& p, acquire_result& out,
                       boost::system::error_code& ec);

/// renew and release: UNWATCH; WATCH lock; HMGET lock owner contended.
request read_owner(const names& k);
/// Ours: PEXPIRE and HDEL contended (its count says whether someone asked). Not ours: done.
plan<renew_result> plan_renew(const response& reads, const names& k, const std::string& token,
                              std::chrono::milliseconds ttl);
outcome finish_renew(const response& written, renew_result& out, boost::system::error_code& ec);
/// Ours: UNLINK and PUBLISH released. Not ours: done, false.
plan<bool> plan_release(const response& reads, const names& k, const std::string& token);
outcome finish_release(const response& written, bool& out, boost::system::error_code& ec);

/// The operator's override, one request and no WATCH: MULTI; HDEL lock's lease fields;
/// PUBLISH released; EXEC. HDEL, not UNLINK: a read-write lock's or a semaphore's mark in
/// the hash (its `set` field) stays while they hold the name.
request force_release(const names& k);
/// true if a lease was freed.
boost::system::error_code decode_force_release(const response& written, bool& out);

/// One consistent snapshot: MULTI; HMGET lock owner fence; PTTL lock; GET fence; LLEN queue; EXEC.
request status(const names& k);
boost::system::error_code decode_status(const response& written, lock_status& out);

/// The text of the first error reply, or empty (EXECABORT follows the refused command's own
/// error: this finds the refused one).
std::string first_error(const response& r);

}  // namespace dlock::redis::tx
