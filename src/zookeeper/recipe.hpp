// SPDX-License-Identifier: BSL-1.0
// The lock recipe's pure part, in Apache Curator's node layout (InterProcessMutex), so that
// dlock and Curator on the same path exclude each other: contenders create
// `<lock path>/_c_<guid>-lock-<sequence>` (ephemeral, sequential) under the lock path; the
// lowest sequence holds; each waiter watches the node just before its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::zookeeper::recipe {

/// A 36-character UUID-shaped guid derived from the lease token and the session that
/// creates the node: the same token in the same session always gives the same guid (a
/// create whose reply was lost is found again by it), while a session given up leaves
/// nodes that a later session of the same token never takes for its own (issue 29: the
/// old node may outlive the session at the servers for a whole timeout).
std::string guid_of(std::string_view token, std::int64_t session);

/// `_c_<guid>-lock-`: the name a contender asks ZooKeeper to create (it appends 10 digits).
std::string node_prefix(std::string_view token, std::int64_t session);

/// The sequence number of a contender's node name (the digits after the last "lock-"),
/// or nothing if the name is not a contender's.
std::optional<std::int64_t> sequence_of(std::string_view child);

/// The lock path of a name: `<root>/<name>`. Empty message if valid.
std::string lock_path(std::string_view root, std::string_view name, std::string& why);

/// The contenders among a lock path's children, lowest sequence first (others ignored).
std::vector<std::string> contenders(std::vector<std::string> children);

/// Where a token's node of `session` stands among sorted contenders.
struct position {
    bool found = false;       ///< a node of the token's and session's guid exists
    std::string node{};       ///< its name
    bool first = false;       ///< it holds the lock
    std::string predecessor;  ///< the node just before it (empty if first or not found)
    std::size_t index = 0;
};
position find(const std::vector<std::string>& sorted, std::string_view token, std::int64_t session);

}  // namespace dlock::zookeeper::recipe
