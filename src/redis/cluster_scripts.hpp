// SPDX-License-Identifier: BSL-1.0
// The scripts of cluster_store that differ from redis_store's: a release wakes watchers
// through sharded pub/sub (SPUBLISH, Redis 7.0+), which reaches only the subscribers of the
// shard owning the channel's slot, instead of PUBLISH, which a cluster broadcasts to every
// node. acquire, renew and status are redis_store's scripts unchanged.
#pragma once

namespace dlock::cluster_scripts {

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
