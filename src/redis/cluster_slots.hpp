// SPDX-License-Identifier: BSL-1.0
// Redis Cluster routing, sans-io: the slot map (from CLUSTER SLOTS or CLUSTER SHARDS),
// parsing of MOVED / ASK / TRYAGAIN error replies, and what to do after each attempt.
// Holds no sockets, timers or clocks; cluster_store drives it.
#pragma once

#include <dlock/redis/reply.hpp>

#include <boost/system/error_code.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::redis::detail {

/// Number of hash slots in a Redis Cluster.
inline constexpr unsigned cluster_slot_count = 16384;

/// A node's address as the cluster announces it.
struct node_address {
    std::string host;
    std::uint16_t port = 0;

    /// "host:port" (IPv6 hosts as announced, without brackets): the map key of a node.
    std::string to_string() const;
    friend bool operator==(const node_address&, const node_address&) = default;
};

/// Parses "host:port" (the port after the last ':'); an empty host becomes `fallback_host`
/// (Redis announces "" or "?" when the node does not know its own address).
std::optional<node_address> parse_address(std::string_view text, std::string_view fallback_host);

/// Which master serves each slot.
class slot_map {
public:
    slot_map();

    /// The master of `slot`, or nullptr if no node serves it (or the map is empty).
    const node_address* master_of(unsigned slot) const noexcept;
    /// Points `slot` at `addr` (a MOVED reply's news). Returns true if it changed.
    bool assign(unsigned slot, const node_address& addr);
    /// Points [first, last] at `addr`.
    void assign_range(unsigned first, unsigned last, const node_address& addr);
    /// The distinct masters serving at least one slot, in first-seen order.
    std::vector<node_address> masters() const;
    /// Number of slots with a master.
    unsigned covered() const noexcept;
    bool empty() const noexcept { return covered() == 0; }

private:
    std::uint16_t index_of(const node_address& addr);
    static constexpr std::uint16_t none = 0xffff;
    std::vector<node_address> nodes_;  // may hold masters that serve nothing any more
    std::array<std::uint16_t, cluster_slot_count> owner_;
    unsigned covered_ = 0;
};

/// Builds a map from a CLUSTER SLOTS reply: [[start, end, [host, port, id, ...], replicas...], ...].
/// `asked_host` replaces an empty or "?" host. False (with `err` saying why) on a bad shape.
bool parse_cluster_slots(const reply& r, std::string_view asked_host, slot_map& out, std::string& err);

/// Builds a map from a CLUSTER SHARDS reply (Redis 7+): each shard a flat map with "slots"
/// (start, end pairs) and "nodes" (flat maps with "ip"/"endpoint", "port"/"tls-port", "role").
bool parse_cluster_shards(const reply& r, std::string_view asked_host, slot_map& out, std::string& err);

/// A cluster redirection or transient condition carried by an error reply.
enum class redirect_kind : std::uint8_t {
    none,      ///< not a cluster redirection: an ordinary error
    moved,     ///< -MOVED slot host:port: the slot lives there now
    ask,       ///< -ASK slot host:port: this once, ask there with ASKING (slot migrating)
    tryagain,  ///< -TRYAGAIN: a multi-key command during a migration; retry shortly
    down,      ///< -CLUSTERDOWN: the cluster cannot serve the slot right now
};

struct redirect {
    redirect_kind kind = redirect_kind::none;
    unsigned slot = 0;
    node_address target;  ///< for moved and ask
};

/// Classifies an error reply's text. `from_host` fills an empty host ("MOVED 12 :7001").
redirect parse_redirect(std::string_view error_text, std::string_view from_host);

/// What to do after one attempt of a command routed to a slot.
enum class step_kind : std::uint8_t {
    done,         ///< hand the result (success or an ordinary error) to the caller
    retry_moved,  ///< update the slot's entry to `target` and send it there
    retry_ask,    ///< send ASKING + the command to `target`, leaving the map as it is
    retry_later,  ///< wait a little, then route again (TRYAGAIN, CLUSTERDOWN)
    fail,         ///< give up: too many redirects (`ec` says what to report)
};

struct step {
    step_kind kind = step_kind::done;
    node_address target;
    /// Re-read the whole map in the background (after MOVED, a lost connection, a down
    /// cluster): the slot moved, and its neighbours probably moved with it.
    bool refresh = false;
    boost::system::error_code ec;
};

/// Decides the next step from an attempt's outcome. `ec`/`r` as a connection completes a
/// script (error::server_error with the error reply in `r`); `from` is the node asked;
/// `attempts` counts the attempts made so far for this operation (1 after the first);
/// only a MOVED or an ASK fails at `max_attempts` (TRYAGAIN and CLUSTERDOWN: retry_later
/// always, the caller bounds them by time).
step next_step(boost::system::error_code ec, const reply& r, const node_address& from, int attempts, int max_attempts);

}  // namespace dlock::redis::detail
