// SPDX-License-Identifier: BSL-1.0
// One etcd cluster as dlock's etcd recipe uses it (src/etcd/codec.cpp's transactions): a
// revision counter, the keys of one name with their create revisions and leases, leases
// that expire on the server's clock (deleting their keys), and watches of single keys'
// deletions. A leader change refreshes every lease to its full TTL, as etcd does.
#pragma once

#include "world.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace dlock::sim {

class etcd_model {
public:
    explicit etcd_model(world& w) : w_(w) {}

    struct key_value {
        std::string key, value;
        std::int64_t create = 0, lease = 0;
    };

    std::int64_t grant(milliseconds ttl);
    /// A keep-alive: false if the lease is gone.
    bool keepalive(std::int64_t lease);
    void revoke(std::int64_t lease);
    bool lease_alive(std::int64_t lease) const { return leases_.count(lease) != 0; }

    struct acquire_reply {
        bool lease_gone = false;  ///< "requested lease not found"
        std::optional<key_value> mine, owner;
    };
    /// The Lock transaction (queued: put ours if absent), or the try (put ours only if the
    /// name has no key); either way ours and the first-created key read back.
    acquire_reply acquire(const std::string& key, const std::string& value, std::int64_t lease, bool queued);
    struct confirm_reply {
        bool owned = false;
        std::size_t count = 0;
    };
    /// Our key is still the one created at `created` (or carries `value`, if 0): and the count.
    confirm_reply confirm(const std::string& key, std::int64_t created, const std::string& value) const;
    /// Deletes our key if still ours (as confirm); whether it was deleted, and was the first.
    std::pair<bool, bool> release(const std::string& key, std::int64_t created, const std::string& value);
    struct place {
        std::int64_t revision = 0;
        bool mine_exists = false;
        std::optional<std::string> predecessor;  ///< the key created last before ours
    };
    place predecessor(const std::string& key, std::int64_t mine) const;
    /// A watch of `key`'s deletion for the connection `conn`: its starting revision.
    std::int64_t watch(int conn, const std::string& key);
    void unwatch(int conn, const std::string& key) { watches_.erase({conn, key}); }
    void unwatch_all(int conn);
    /// A leader change: every lease starts its TTL again.
    void leader_change();

    /// Called for each watched key's deletion (the world delivers it).
    std::function<void(int conn, const std::string& key)> on_deleted;
    /// What is still there: a key, or a watch.
    std::string leftovers() const;

private:
    bool owns(const std::string& key, std::int64_t created, const std::string& value) const;
    std::optional<key_value> first() const;
    void erase(const std::string& key);
    void arm_expiry(std::int64_t lease);

    struct lease_row {
        milliseconds ttl;
        real_time expires;
    };
    world& w_;
    std::int64_t revision_ = 1, next_lease_ = 0x694d000000000000;
    std::map<std::string, key_value> keys_;
    std::map<std::int64_t, lease_row> leases_;
    std::set<std::pair<int, std::string>> watches_;
};

}  // namespace dlock::sim
