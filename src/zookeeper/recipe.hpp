// SPDX-License-Identifier: BSL-1.0
// The lock recipes' pure part, in Apache Curator's node layouts, so that dlock and Curator on
// the same path exclude each other. Contenders create `<lock path>/_c_<guid>-<kind><sequence>`
// (ephemeral, sequential): `lock-` for a mutex (InterProcessMutex), `__READ__` and `__WRIT__`
// for the two sides of a read-write lock (InterProcessReadWriteLock), `latch-` for an
// election's candidates (LeaderLatch). All are ordered by sequence: a mutex, a writer or a
// candidate holds when first and watches the node just before its own; a reader holds when
// no writer is before it and watches the first writer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::zookeeper::recipe {

/// What a contender's node stands for; its name says it.
enum class node_kind : std::uint8_t {
    lock,   ///< `lock-`: a mutex
    read,   ///< `__READ__`: a reader of a read-write lock
    write,  ///< `__WRIT__`: the writer of a read-write lock
    latch,  ///< `latch-`: a candidate of an election (its data: the value it proclaimed)
};

/// The kinds of contenders a lock path has, as a whole.
enum class path_family : std::uint8_t {
    empty,       ///< no contenders
    mutex,       ///< mutex nodes only
    read_write,  ///< readers and writers only
    election,    ///< candidates only
    mixed,       ///< several: some client uses the path as another kind of lock
};

/// The family a node of `k` belongs to (mutex, read_write or election).
path_family family_of(node_kind k) noexcept;

/// A 36-character UUID-shaped guid derived from the lease token and the session that
/// creates the node: the same token in the same session always gives the same guid (a
/// create whose reply was lost is found again by it), while a session given up leaves
/// nodes that a later session of the same token never takes for its own (issue 29: the
/// old node may outlive the session at the servers for a whole timeout).
std::string guid_of(std::string_view token, std::int64_t session);

/// `_c_<guid>-<kind>`: the name a contender asks ZooKeeper to create (it appends 10 digits).
std::string node_prefix(std::string_view token, std::int64_t session, node_kind kind = node_kind::lock);

/// A contender's node name taken apart.
struct contender {
    node_kind kind = node_kind::lock;
    std::int64_t sequence = 0;
};

/// The kind and sequence of a child's name (the digits after its kind's marker), or nothing
/// if the name is not a contender's.
std::optional<contender> parse_contender(std::string_view child);

/// The sequence number of a contender's node name, or nothing if it is not a contender's.
std::optional<std::int64_t> sequence_of(std::string_view child);

/// The lock path of a name: `<root>/<name>`. Empty message if valid.
std::string lock_path(std::string_view root, std::string_view name, std::string& why);

/// The contenders among a lock path's children, lowest sequence first (others ignored).
std::vector<std::string> contenders(std::vector<std::string> children);

/// The family of sorted contenders.
path_family family_of(const std::vector<std::string>& sorted);

/// Where a token's node of `session` stands among sorted contenders.
struct position {
    bool found = false;                ///< a node of the token's and session's guid exists
    std::string node{};                ///< its name
    node_kind kind = node_kind::lock;  ///< what it stands for
    bool first = false;                ///< it holds (a mutex or writer first; a reader with no writer before it)
    std::string predecessor{};         ///< the node it waits for (empty if it holds or is not found)
    std::size_t index = 0;
    /// A node of another family comes before it: the path is another kind of lock.
    bool foreign = false;
    node_kind foreign_kind = node_kind::lock;  ///< with `foreign`: the first such node's kind
};
position find(const std::vector<std::string>& sorted, std::string_view token, std::int64_t session);

/// Someone waits for `node` (one of `sorted`): a later node if it is a mutex's or a writer's,
/// a later writer if it is a reader's (later readers share with it). The renewal's
/// `contended`, so that a holder's process stops handing the lock on locally.
bool waited_for(const std::vector<std::string>& sorted, std::string_view node);

/// The nodes that hold now: the first mutex node or writer, or every reader before the
/// first writer (none if the path is mixed at its head).
std::vector<std::string> holders(const std::vector<std::string>& sorted);

}  // namespace dlock::zookeeper::recipe
