// SPDX-License-Identifier: BSL-1.0
// A throwaway Redis Cluster for tests: N masters (redis_server processes with cluster mode
// on), joined with `redis-cli --cluster create`, and helpers to move a slot by hand.
#pragma once

#include <dlock/redis/config.hpp>

#include "common/redis_server.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dlock::test {

class redis_cluster {
public:
    /// Starts `masters` nodes (no replicas), creates the cluster and returns once every
    /// node reports cluster_state:ok. Throws if that does not happen within 30 s.
    explicit redis_cluster(std::size_t masters = 3);
    redis_cluster(const redis_cluster&) = delete;
    redis_cluster& operator=(const redis_cluster&) = delete;

    std::size_t size() const noexcept { return servers_.size(); }
    redis_server& node(std::size_t i) { return *servers_.at(i); }
    /// Every node's config (seeds for a cluster_store).
    std::vector<redis::config> seeds() const;
    /// The node listening on `port`; size() if none.
    std::size_t index_of_port(std::uint16_t port) const;
    /// The node serving `slot`, by asking node 0 (CLUSTER SLOTS via redis-cli).
    std::size_t owner_of(unsigned slot) const;
    /// CLUSTER MYID of node i.
    const std::string& id(std::size_t i) const { return ids_.at(i); }
    /// "127.0.0.1:port" of node i.
    std::string address(std::size_t i) const;

    /// Step 1 of a manual migration of `slot` from node `from` to node `to`:
    /// SETSLOT IMPORTING on the target, then MIGRATING on the source.
    void begin_migration(unsigned slot, std::size_t from, std::size_t to);
    /// Step 2: MIGRATE every key of the slot from `from` to `to`; returns how many moved.
    std::size_t migrate_keys(unsigned slot, std::size_t from, std::size_t to);
    /// Step 3: SETSLOT NODE on the target, the source and every other node, so that all
    /// agree at once (no waiting for gossip).
    void finish_migration(unsigned slot, std::size_t to);

    /// True once every node reports cluster_state:ok (bounded by 30 s).
    bool wait_ok() const;

private:
    std::vector<std::unique_ptr<redis_server>> servers_;
    std::vector<std::string> ids_;
};

}  // namespace dlock::test
