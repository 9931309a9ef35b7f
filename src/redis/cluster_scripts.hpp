// SPDX-License-Identifier: BSL-1.0
// The scripts of cluster_store that differ from redis_store's: a release wakes watchers
// through sharded pub/sub (SPUBLISH, Redis 7.0+), which reaches only the subscribers of the
// shard owning the channel's slot, instead of PUBLISH, which a cluster broadcasts to every
// node. acquire, renew, status, latch_state and leader are redis_store's scripts unchanged;
// count_down and proclaim are redis_store's with their PUBLISH made SPUBLISH (sharded()).
#pragma once

#include <string>
#include <string_view>

namespace dlock::cluster_scripts {

/// A redis_store script whose PUBLISHes go to the channel's shard instead (its channel is
/// in the slot of the script's keys, as every name of a lock is: src/redis/keys.hpp).
inline std::string sharded(std::string_view body)
{
    std::string out(body);
    constexpr std::string_view from = "redis.call('PUBLISH'", to = "redis.call('SPUBLISH'";
    for (auto at = out.find(from); at != std::string::npos; at = out.find(from, at + to.size()))
        out.replace(at, from.size(), to);
    return out;
}

// KEYS: lock. ARGV: token, channel. Deletes only our own lease, then wakes the waiters.
inline constexpr const char* release = R"lua(
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1] then
  redis.call('UNLINK', KEYS[1])
  redis.call('SPUBLISH', ARGV[2], 'released')
  return 1
end
return 0
)lua";

// KEYS: lock. ARGV: channel. The operator's override: whoever holds it.
inline constexpr const char* force_release = R"lua(
local n = redis.call('UNLINK', KEYS[1])
redis.call('SPUBLISH', ARGV[1], 'released')
return n
)lua";

}  // namespace dlock::cluster_scripts
