// The Lua scripts of redis_store. Each is one atomic round trip; all keys share a slot.
#pragma once

namespace dlock::scripts {

// KEYS: lock, fence. ARGV: token, ttl_ms.
// Free -> take it with a new fencing token. Ours already (a retry after a lost reply) ->
// refresh and return the same token. Else -> report the holder's remaining lease.
inline constexpr const char* acquire = R"lua(
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner then
  local fence = redis.call('INCR', KEYS[2])
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'fence', fence)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, fence}
end
if owner == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, tonumber(redis.call('HGET', KEYS[1], 'fence'))}
end
-- Tell the holder that another owner wants the name, so it stops handing off locally.
redis.call('HSET', KEYS[1], 'contended', '1')
return {0, redis.call('PTTL', KEYS[1])}
)lua";

// KEYS: lock. ARGV: token, ttl_ms. Extends the lease only if it is still ours.
// -> 0 not ours; 1 ours; 2 ours and another owner tried to take it since the last renewal.
inline constexpr const char* renew = R"lua(
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if redis.call('HDEL', KEYS[1], 'contended') == 1 then
    return 2
  end
  return 1
end
return 0
)lua";

// KEYS: lock. ARGV: token, channel. Deletes only our own lease, then wakes the waiters.
inline constexpr const char* release = R"lua(
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1] then
  redis.call('UNLINK', KEYS[1])
  redis.call('PUBLISH', ARGV[2], 'released')
  return 1
end
return 0
)lua";

// KEYS: lock. ARGV: channel. The operator's override: whoever holds it.
inline constexpr const char* force_release = R"lua(
local n = redis.call('UNLINK', KEYS[1])
redis.call('PUBLISH', ARGV[1], 'released')
return n
)lua";

// KEYS: lock, fence. -> {owner or false, fence of lease or 0, pttl, counter}
inline constexpr const char* status = R"lua(
local v = redis.call('HMGET', KEYS[1], 'owner', 'fence')
local counter = tonumber(redis.call('GET', KEYS[2]) or '0')
return {v[1], tonumber(v[2] or '0'), redis.call('PTTL', KEYS[1]), counter}
)lua";

}  // namespace dlock::scripts
