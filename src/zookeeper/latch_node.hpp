// SPDX-License-Identifier: BSL-1.0
// A count-down latch on ZooKeeper, in a layout of ours (Curator has no latch), without I/O.
// One node `<root>/<name>/dlock-latch` holds it all: its data is `dlock-latch/<count>/<ttl ms>`
// and a line per member that counted down (`<length>:<member>`), so each count-down is one
// conditional setData (its version read just before) and a member counts once however
// often it is sent. The latch expires `ttl` (its first count-down's) after its latest
// count-down, judged on the servers' clock: the node's mtime against the mtime of a write
// made just before the read (src/zookeeper/latch.cpp). Where the servers allow TTL nodes it is
// one with that ttl, which they delete once expired; else the next read that finds it
// expired deletes it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::zookeeper::latch_node {

/// The latch's node, a child of the name's path.
inline constexpr std::string_view name = "dlock-latch";
/// kind_mismatch's text for another kind of lock on a latch's name.
inline constexpr std::string_view in_use_text = "dlock: the name is in use as a latch";

/// Whether a name's children hold a latch.
inline bool in(const std::vector<std::string>& children)
{
    for (const auto& c : children)
        if (c == name)
            return true;
    return false;
}

/// The most data a latch node may hold: under the servers' default jute.maxbuffer (1 MiB)
/// with room for the request around it.
inline constexpr std::size_t max_data = 1000 * 1000;

struct content {
    std::uint64_t count = 0;
    std::int64_t ttl_ms = 0;
    std::vector<std::string> members{};
};

std::string encode(const content& c);
/// The latch in a node's data, or nothing if the data is not a latch's.
std::optional<content> decode(std::string_view data);

/// Expired at the servers' time `now` (ms) if its latest count-down, at `mtime`, is `ttl`
/// or more ago.
inline bool expired(const content& c, std::int64_t mtime, std::int64_t now) noexcept
{
    return now - mtime >= c.ttl_ms;
}

/// One count-down of `member` on the latch as read (nothing: none, or expired), as Redis's
/// script does it: the first creates the latch with `count` and `ttl`, another count is
/// refused, a member counts once and the members never exceed the count. The ttl stays the
/// first count-down's: a TTL node's cannot change, and the servers delete it by that one.
struct step {
    bool mismatch = false;        ///< the latch has another count (`have`): nothing to write
    std::uint64_t have = 0;       ///< with `mismatch`
    bool too_big = false;         ///< the members would not fit in one node: nothing to write
    content next{};               ///< what to write otherwise
    std::uint64_t remaining = 0;  ///< count-downs still missing after it (0: done)
};
step count_down(const std::optional<content>& current, std::string_view member, std::uint64_t count,
                std::int64_t ttl_ms);

/// Count-downs still missing on a latch.
inline std::uint64_t remaining(const content& c) noexcept
{
    return c.members.size() >= c.count ? 0 : c.count - c.members.size();
}

}  // namespace dlock::zookeeper::latch_node
