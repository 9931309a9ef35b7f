// SPDX-License-Identifier: BSL-1.0
// One memcached server as memcached_store's meta commands use it (src/memcached/): items
// with a value, a CAS id (one counter for the server, moved by every store and every
// arithmetic) and an expiry on the server's clock, which ticks in whole seconds (a TTL of
// T seconds set at a tick's middle runs out between T-1 and T seconds later); mg, ms (set,
// add with ME, compare with C), md (with C) and ma (autovivified with N and J). The model
// reads the very bytes the store's acquire_steps and owner_steps send, and answers with the
// replies they parse. A restart loses every item; an eviction loses one.
#pragma once

#include "memcached/protocol.hpp"
#include "world.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::sim {

class memcached_model {
public:
    /// `tick_phase`: where in a real second the server's clock ticks.
    explicit memcached_model(real_time tick_phase = real_time(0)) : phase_(tick_phase) {}

    /// Runs the commands in `bytes` in order at `now`, one reply each.
    std::vector<memcached::proto::reply> execute(std::string_view bytes, real_time now);
    /// A restart: every item is gone.
    void restart() { items_.clear(); }
    /// Memory pressure: the item `key` is evicted (true if it was there).
    bool evict(const std::string& key) { return items_.erase(key) != 0; }
    /// The live items' keys (for leftovers and holders).
    std::vector<std::string> keys(real_time now) const;
    /// A live item's value.
    std::optional<std::string> value(const std::string& key, real_time now) const;

private:
    struct item {
        std::string value;
        std::uint64_t cas = 0;
        std::int64_t exptime = 0;  // the server's second it expires at; 0: never
    };
    // The server's clock, in whole seconds (memcached's current_time).
    std::int64_t seconds(real_time now) const;
    bool live(const item& it, real_time now) const { return it.exptime == 0 || seconds(now) < it.exptime; }
    item* find(const std::string& key, real_time now);
    memcached::proto::reply run(const std::vector<std::string>& words, std::string_view data, real_time now);
    memcached::proto::reply get(const std::string& key, const std::vector<std::string>& flags, real_time now);
    memcached::proto::reply set(const std::string& key, std::string_view data, const std::vector<std::string>& flags,
                                real_time now);
    memcached::proto::reply del(const std::string& key, const std::vector<std::string>& flags, real_time now);
    memcached::proto::reply arith(const std::string& key, const std::vector<std::string>& flags, real_time now);
    std::int64_t expiry(const std::vector<std::string>& flags, char f, real_time now) const;

    real_time phase_;
    std::uint64_t cas_ = 0;
    std::map<std::string, item> items_;
};

}  // namespace dlock::sim
