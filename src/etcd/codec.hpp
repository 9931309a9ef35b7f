// SPDX-License-Identifier: BSL-1.0
// The etcd v3 JSON gateway's messages for the lock recipe: request bodies built and reply
// bodies parsed without I/O, unit-tested without a server (as resp/ is for Redis).
#pragma once

#include <boost/system/error_code.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::etcd::detail {

// Gateway paths (etcd 3.4).
inline constexpr std::string_view txn_path = "/v3/kv/txn";
inline constexpr std::string_view range_path = "/v3/kv/range";
inline constexpr std::string_view grant_path = "/v3/lease/grant";
inline constexpr std::string_view keepalive_path = "/v3/lease/keepalive";
inline constexpr std::string_view revoke_path = "/v3/lease/revoke";
inline constexpr std::string_view ttl_path = "/v3/lease/timetolive";
inline constexpr std::string_view watch_path = "/v3/watch";

std::string base64_encode(std::string_view in);
/// False on a character outside the alphabet or a bad length.
bool base64_decode(std::string_view in, std::string& out);
/// The end of the range of every key that starts with `prefix` (etcd's "prefix" option).
std::string prefix_end(std::string_view prefix);
/// The lock's key: `<prefix><name>/<lease id in lower-case hex>`, etcd's concurrency.Mutex layout.
std::string lock_key(std::string_view name_prefix, std::int64_t lease);

struct key_value {
    std::string key, value;
    std::int64_t create_revision = 0, mod_revision = 0, lease = 0;
};

/// A failed reply: the dlock error and the server's text.
struct reply_error {
    boost::system::error_code code;
    std::string text;
};

/// Maps an HTTP status and a gateway error body ({"error","code","message"}) to a dlock
/// error; transient for what a retry can cure (no leader, timeouts, unavailable).
reply_error classify(unsigned http_status, std::string_view body);

// ---- the lock's transactions ------------------------------------------------------------
// `prefix` is the name's range: `<prefix><name>/`; `key` is ours in it; `value` our token.

/// Queued acquire (etcd's Mutex.Lock): put our key if absent (else read it back), and read
/// the range's first-created key (a semaphore: its first `firsts` keys) in the same step.
std::string queued_acquire_txn(std::string_view key, std::string_view prefix, std::string_view value,
                               std::int64_t lease, std::int64_t firsts = 1);
/// Unqueued attempt: put our key only if the range is empty; else read ours and the first.
std::string try_acquire_txn(std::string_view key, std::string_view prefix, std::string_view value, std::int64_t lease);

struct acquire_reply {
    std::int64_t revision = 0;       ///< the Txn's header revision
    bool put = false;                ///< our key was created by this Txn
    std::optional<key_value> mine;   ///< our key as it is now (put: value, create = revision)
    std::optional<key_value> owner;  ///< the range's first-created key, if any
    std::vector<key_value> firsts;   ///< the range's first-created keys read (owner first)
};
bool parse_acquire(std::string_view body, bool queued, std::string_view key, std::string_view value, std::int64_t lease,
                   acquire_reply& out, reply_error& err);

/// How a transaction knows our key is still the one we put: by its create revision once
/// known (an election's leader rewrites its value), else by the value we put (a mutex's
/// token; an election candidate's empty value).
struct our_key {
    std::string_view key;
    std::int64_t created = 0;  ///< the key's create revision, 0 if unknown
    std::string_view value;    ///< compared when `created` is 0
};

/// Confirms our key and counts the range (others queued behind us).
std::string confirm_txn(our_key mine, std::string_view prefix);
struct confirm_reply {
    bool owned = false;
    std::int64_t count = 0;
};
bool parse_confirm(std::string_view body, confirm_reply& out, reply_error& err);

/// Deletes our key if it still carries our token, reading the range's first key (a
/// semaphore: its first `firsts`) just before: a release reports whether the key held the
/// name (a queued one is withdrawn).
std::string release_txn(our_key mine, std::string_view prefix, std::int64_t firsts = 1);
/// Whether our key was deleted, and whether it was among the first (a holder).
bool parse_release(std::string_view body, std::string_view key, bool& deleted, bool& held, reply_error& err);
/// Deletes `key` if it is still the key created at `create_revision` (the operator's force
/// release: not a successor's).
std::string delete_if_created_txn(std::string_view key, std::int64_t create_revision);
/// Whether the Txn's compare held ("succeeded").
bool parse_succeeded(std::string_view body, bool& out, reply_error& err);

/// Puts `value` into our key, keeping its lease, if it is still the key created at
/// `created` (etcd's Election.Proclaim): a deposed leader's write finds no such key.
std::string proclaim_txn(std::string_view key, std::int64_t created, std::string_view value, std::int64_t lease);

/// While our key (created at `mine`) exists, the key created last before it in the range.
std::string predecessor_txn(std::string_view key, std::int64_t mine, std::string_view prefix);
struct predecessor_reply {
    std::int64_t revision = 0;
    bool mine_exists = false;
    std::optional<key_value> predecessor;
};
bool parse_predecessor(std::string_view body, predecessor_reply& out, reply_error& err);

/// Every key of the range, oldest first (status).
std::string range_request(std::string_view prefix, std::int64_t limit = 0);
struct range_reply {
    std::int64_t revision = 0;
    std::int64_t count = 0;
    std::vector<key_value> kvs;
};
bool parse_range(std::string_view body, range_reply& out, reply_error& err);

// ---- read-write locks, in the layout of etcd's contrib/recipes RWMutex ----
// Readers' keys under `<range>read/`, writers' under `<range>write/`; a writer holds when its
// key is the range's first by creation, a reader when no writer's key is older than its own.

/// `<range>read/` or `<range>write/`.
std::string side_prefix(std::string_view range, bool write);
/// Whether `key` (of the name's range `range`) is a read-write lock's.
bool is_rw_key(std::string_view range, std::string_view key);
/// Puts our key if absent (else reads it back), and reads the range's first key and the
/// first writer's, in one step.
std::string rw_acquire_txn(std::string_view key, std::string_view range, std::string_view value, std::int64_t lease);
/// As parse_acquire, with `first_writer` = the first writer's key, if any.
bool parse_rw_acquire(std::string_view body, std::string_view key, std::string_view value, std::int64_t lease,
                      acquire_reply& out, std::optional<key_value>& first_writer, reply_error& err);

// ---- semaphores: every permit a key of the name's range, the first N by creation hold ----
/// A permit's value: `dlock-semaphore/<permits>/<token>`, so that every user of the name
/// sees how many permits it was acquired under (a mutex's value is its token; etcdctl's and
/// an election candidate's are empty or a proclaimed value).
std::string permit_value(std::string_view token, unsigned permits);
/// The permits a key's value was put under, or nothing if it is not a permit's.
std::optional<unsigned> permits_in(std::string_view value);

// ---- leases -----------------------------------------------------------------------------
std::string grant_request(std::int64_t ttl_seconds);
std::string lease_id_request(std::int64_t id);  ///< keepalive, revoke, timetolive
struct lease_reply {
    std::int64_t id = 0;
    std::int64_t ttl = 0;          ///< seconds; <= 0: the lease is gone (timetolive: -1; 0 is under a second left)
    std::int64_t granted_ttl = 0;  ///< timetolive: the lease's full TTL (0 if not said)
};
/// Grant and timetolive replies; keepalive's stream message ({"result": ...}) too.
bool parse_lease(std::string_view body, lease_reply& out, reply_error& err);

// ---- watches ----------------------------------------------------------------------------
/// Deletions of `key` or of [key, range_end), from `start_revision`; with `puts`, the puts
/// too (an election's observers hear a proclaimed value), else etcd filters them (NOPUT).
std::string watch_create_request(std::string_view key, std::string_view range_end, std::int64_t start_revision,
                                 bool puts = false);
struct watch_message {
    bool created = false;
    bool canceled = false;
    std::int64_t compact_revision = 0;  ///< > 0: start_revision was compacted away
    std::int64_t revision = 0;          ///< header revision
    std::vector<key_value> deleted;     ///< keys deleted (DELETE events), with mod_revision
    std::vector<key_value> rewritten;   ///< existing keys put again (a new value: mod > create revision)
};
/// One message of the watch stream (one JSON object per line).
bool parse_watch_message(std::string_view line, watch_message& out, reply_error& err);

}  // namespace dlock::etcd::detail
