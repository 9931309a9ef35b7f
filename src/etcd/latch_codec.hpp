// SPDX-License-Identifier: BSL-1.0
// A count-down latch's keys on etcd, in a layout of ours, without I/O. Under the name's range
// R = `<prefix><name>/`: `R latch` (value `dlock-latch/<count>`) and one `R member/<member>`
// per member that counted down, all on one etcd lease of the latch's own whose TTL is the
// latch's: etcd forgets the latch when it runs out, done or not, and no key is left behind.
#pragma once

#include "etcd/codec.hpp"

namespace dlock::etcd::detail {

std::string latch_key(std::string_view range);
std::string member_key(std::string_view range, std::string_view member);
std::string latch_value(std::uint64_t count);
/// The count a latch key's value was put with, or nothing if it is not a latch's.
std::optional<std::uint64_t> latch_count_in(std::string_view value);
/// Whether `key` (of the name's range `range`) is a latch's: its latch key or a member's.
bool is_latch_key(std::string_view range, std::string_view key);

/// Reads the latch key, the range's first-created key (what the name is) and the number of
/// members, at one revision.
std::string latch_read_txn(std::string_view range);
struct latch_read {
    std::int64_t revision = 0;
    std::optional<key_value> latch;  ///< the latch key
    std::optional<key_value> first;  ///< the range's first-created key
    std::int64_t members = 0;
};
bool parse_latch_read(std::string_view body, latch_read& out, reply_error& err);

/// If the latch key is still the one created at `created` (0: the name has no key at all),
/// puts the latch key (again: its waiters hear the new value) and the member's key, all on
/// `lease`, and counts the members.
std::string latch_count_down_txn(std::string_view range, std::int64_t created, std::uint64_t count,
                                 std::string_view member, std::int64_t lease);
/// If the latch key is still the one created at `created`, puts it again unchanged: a new
/// value for the name's watchers (a done latch wakes its waiters).
std::string latch_touch_txn(std::string_view range, std::int64_t created, std::uint64_t count, std::int64_t lease);
struct latch_count {
    bool put = false;  ///< the compare held: the member is in
    std::int64_t members = 0;
    std::int64_t revision = 0;  ///< the Txn's (the latch key's create revision if it made it)
};
bool parse_latch_count_down(std::string_view body, latch_count& out, reply_error& err);

}  // namespace dlock::etcd::detail
