// SPDX-License-Identifier: BSL-1.0
// A semaphore's nodes in Apache Curator's InterProcessSemaphoreV2 layout, without I/O. Under
// the semaphore's path `<root>/<name>`: `locks`, an InterProcessMutex that acquirers take
// in turn (FIFO: its holder is the only one allowed to take a lease), and `leases`, one
// ephemeral sequential node per permit held, `_c_<guid>-lease-<sequence>`. The holder of
// `locks` creates its lease node and holds a permit once the leases number no more than
// the permits; else it waits, still holding `locks`, for a lease to go. Curator agrees on
// the number of permits by convention only; dlock writes its number into its lease nodes'
// names (`_c_<guid>-lease-of<N>-<sequence>`, which Curator counts like its own) so that a
// dlock acquirer with another number is refused.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::zookeeper::semaphore_layout {

inline constexpr std::string_view locks = "locks";    ///< the internal mutex's path, under the semaphore's
inline constexpr std::string_view leases = "leases";  ///< the lease nodes' parent, under the semaphore's

/// `_c_<guid>-lease-of<permits>-`: the name a dlock lease node is created with (ZooKeeper
/// appends 10 digits).
std::string lease_prefix(std::string_view token, std::int64_t session, unsigned permits);

/// The permits a dlock lease node's name was created with, or nothing (Curator's own
/// `_c_<guid>-lease-<sequence>`, or anything else).
std::optional<unsigned> permits_of(std::string_view child);

/// Whether the children of a name's path are a semaphore's: `locks` or `leases` is among
/// them (they may be empty containers the servers have not reaped yet).
bool has_semaphore(const std::vector<std::string>& children);

/// What the children of `leases` say to a dlock acquirer of `permits`.
struct lease_count {
    std::size_t count = 0;  ///< every child: Curator counts them all, its own and others'
    bool found = false;     ///< our node (the token's and session's guid) is among them
    std::string node{};     ///< its name
    /// A dlock lease node made with another number of permits (the first one found).
    std::optional<unsigned> other_permits{};
};
lease_count count_leases(const std::vector<std::string>& children, std::string_view token, std::int64_t session,
                         unsigned permits);

}  // namespace dlock::zookeeper::semaphore_layout
