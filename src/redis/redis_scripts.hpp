// SPDX-License-Identifier: BSL-1.0
// The Lua scripts of redis_store. Each is one atomic round trip; all keys share a slot.
#pragma once

namespace dlock::scripts {

// KEYS: lock, fence[, queue, queue_ttls]. ARGV: token, ttl_ms[, "1" to queue or "0",
// grant channel prefix] (the queue keys and the prefix: a store with the direct hand-off).
// Free -> take it with a new fencing token, unless waiters queued before us are still
// there: a holder whose lease ran out (crashed, paused) leaves the name to them in order, so
// the first whose grant channel has a listener is handed it, as a release hands it, and we
// are refused (and queued) behind it. Ours already (a retry after a lost reply, or a
// hand-off) -> refresh and return the same token. Else -> report the holder's remaining
// lease, and with "1" queue the token for a direct hand-off at the holder's release.
// The queue outlives the holder's lease by one waiter lease: a live waiter retries (and
// re-queues) by then, so only a dead one's entry can vanish. A name held or queued as a
// read-write lock or a semaphore has the field `set` in this hash (set_scripts.hpp):
// -> {-1, its value} (0: a read-write lock; N: a semaphore of N permits), nothing changed.
// Read by the same HMGET that reads the owner: the mutex pays no extra command for it.
inline constexpr const char* acquire = R"lua(
local v = redis.call('HMGET', KEYS[1], 'owner', 'set')
local owner = v[1]
if v[2] then
  return {-1, tonumber(v[2])}
end
local queue = ARGV[3] == '1'
if not owner and KEYS[3] then
  while true do
    local w = redis.call('LINDEX', KEYS[3], 0)
    if not w or w == ARGV[1] then break end
    redis.call('LPOP', KEYS[3])
    local ttl = redis.call('HGET', KEYS[4], w)
    redis.call('HDEL', KEYS[4], w)
    local ch = ARGV[4] .. w
    local n = ttl and redis.pcall('PUBSUB', 'NUMSUB', ch)
    if n and (n.err or n[2] > 0) then
      local fence = redis.call('INCR', KEYS[2])
      redis.call('HSET', KEYS[1], 'owner', w, 'fence', fence)
      if redis.call('EXISTS', KEYS[3]) == 1 then
        redis.call('HSET', KEYS[1], 'queued', '1')
      end
      redis.call('PEXPIRE', KEYS[1], ttl)
      redis.call('PUBLISH', ch, string.format('%d', fence) .. ' ' .. ttl)
      owner = w
      break
    end
  end
end
if not owner then
  local fence = redis.call('INCR', KEYS[2])
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'fence', fence)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if KEYS[3] and redis.call('HDEL', KEYS[4], ARGV[1]) == 1 then
    redis.call('LREM', KEYS[3], 0, ARGV[1])
  end
  return {1, fence}
end
if owner == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, tonumber(redis.call('HGET', KEYS[1], 'fence'))}
end
local pttl = redis.call('PTTL', KEYS[1])
if not queue then
  -- Tell the holder that another owner wants the name, so it stops handing off locally.
  redis.call('HSET', KEYS[1], 'contended', '1')
  return {0, pttl}
end
redis.call('HSET', KEYS[1], 'contended', '1', 'queued', '1')
if redis.call('HSET', KEYS[4], ARGV[1], ARGV[2]) == 1 then
  redis.call('RPUSH', KEYS[3], ARGV[1])
end
-- Only ever extended: a waiter with a shorter lease must not cut a longer one's entry short.
local keep = pttl + ARGV[2]
for i = 3, 4 do
  if redis.call('PTTL', KEYS[i]) < keep then
    redis.call('PEXPIRE', KEYS[i], keep)
  end
end
return {0, pttl}
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

// KEYS: one lock per lease. ARGV: token, ttl_ms per lease. The renew script for many
// leases in one call (the watchdog's renewals of one turn): {0, 1 or 2 per lease, as renew;
// a key that is not a lock hash gets its error in its place, and the others still renew}.
inline constexpr const char* renew_many = R"lua(
local out = {}
for i = 1, #KEYS do
  local owner = redis.pcall('HGET', KEYS[i], 'owner')
  if type(owner) == 'table' then
    out[i] = owner
  elseif owner == ARGV[2 * i - 1] then
    redis.call('PEXPIRE', KEYS[i], ARGV[2 * i])
    out[i] = redis.call('HDEL', KEYS[i], 'contended') == 1 and 2 or 1
  else
    out[i] = 0
  end
end
return out
)lua";

// KEYS: lock, fence, queue, queue_ttls. ARGV: token, channel, grant channel prefix[, "1":
// the operator's override, whoever holds it]. Frees our own lease; if waiters queued, hands
// it to the first one still subscribed to its grant channel (a dead one has no
// subscription) with a new fencing token, in the same step. A token that does not hold the
// name is withdrawn from the queue instead. -> 1 freed or handed off, 0 not ours / not held.
// NUMSUB goes through pcall: a user whose ACL lacks it must not fail the release half done;
// its waiters are then all taken as live.
inline constexpr const char* release = R"lua(
local force = ARGV[4] == '1'
local v = redis.call('HMGET', KEYS[1], 'owner', 'queued')
if not v[1] or (not force and v[1] ~= ARGV[1]) then
  if force then
    redis.call('PUBLISH', ARGV[2], 'released')
  elseif redis.call('HDEL', KEYS[4], ARGV[1]) == 1 then
    redis.call('LREM', KEYS[3], 0, ARGV[1])
  end
  return 0
end
if v[2] then
  while true do
    local w = redis.call('LPOP', KEYS[3])
    if not w then break end
    local ttl = redis.call('HGET', KEYS[4], w)
    redis.call('HDEL', KEYS[4], w)
    local ch = ARGV[3] .. w
    local n = ttl and w ~= v[1] and redis.pcall('PUBSUB', 'NUMSUB', ch)
    if n and (n.err or n[2] > 0) then
      local fence = redis.call('INCR', KEYS[2])
      redis.call('DEL', KEYS[1])
      redis.call('HSET', KEYS[1], 'owner', w, 'fence', fence)
      if redis.call('EXISTS', KEYS[3]) == 1 then
        redis.call('HSET', KEYS[1], 'queued', '1', 'contended', '1')
      end
      redis.call('PEXPIRE', KEYS[1], ttl)
      redis.call('PUBLISH', ch, string.format('%d', fence) .. ' ' .. ttl)
      return 1
    end
  end
end
redis.call('UNLINK', KEYS[1])
redis.call('PUBLISH', ARGV[2], 'released')
return 1
)lua";

// KEYS: lock, fence[, queue]. -> {owner or false, fence of lease or 0, pttl, counter, queued}
// (the leader read passes no queue key: on a Cluster a key absent during a slot migration
// turns the read into TRYAGAIN, waited out.)
inline constexpr const char* status = R"lua(
local v = redis.call('HMGET', KEYS[1], 'owner', 'fence')
local counter = tonumber(redis.call('GET', KEYS[2]) or '0')
local queued = KEYS[3] and redis.call('LLEN', KEYS[3]) or 0
return {v[1], tonumber(v[2] or '0'), redis.call('PTTL', KEYS[1]), counter, queued}
)lua";

// ---- count-down latch ----

// KEYS: latch hash {count}, members set. ARGV: member, count, ttl_ms, channel.
// The first count-down creates the latch with its count; another count is refused. SADD
// makes a member count once however often it is sent (a retry after a lost reply); the
// set never grows past the count. The count-down that completes the latch publishes on the
// name's release channel, as a lock's release does, so waiters' watches report `released`.
// Both keys expire `ttl` after the latest count-down.
// -> {1, remaining} counted (or already counted); {0, count} the latch has another count.
inline constexpr const char* count_down = R"lua(
local count = tonumber(ARGV[2])
local have = redis.call('HGET', KEYS[1], 'count')
if have and tonumber(have) ~= count then
  return {0, tonumber(have)}
end
if not have then
  redis.call('HSET', KEYS[1], 'count', ARGV[2])
end
local n = redis.call('SCARD', KEYS[2])
if n < count and redis.call('SADD', KEYS[2], ARGV[1]) == 1 then
  n = n + 1
  if n == count then
    redis.call('HSET', KEYS[1], 'done', '1')
    redis.call('PUBLISH', ARGV[4], 'done')
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return {1, count - n}
)lua";

// KEYS: latch hash, members set. -> {count or 0 (no latch), members counted}.
inline constexpr const char* latch_state = R"lua(
local count = tonumber(redis.call('HGET', KEYS[1], 'count') or '0')
return {count, redis.call('SCARD', KEYS[2])}
)lua";

// ---- elections ----

// KEYS: lock. ARGV: token, value, channel. Fenced by the lease: writes the leader's value
// into the lock hash only if the token still owns it, and publishes on the name's release
// channel so that observers read it. A hand-off or a new lease starts from a fresh hash, so
// a value never outlives its lease. -> 1 written, 0 not ours.
inline constexpr const char* proclaim = R"lua(
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'value', ARGV[2])
redis.call('PUBLISH', ARGV[3], 'leader')
return 1
)lua";

// KEYS: lock, fence. -> {owner or false, fence of lease or 0, pttl, counter, value or false}.
inline constexpr const char* leader = R"lua(
local v = redis.call('HMGET', KEYS[1], 'owner', 'fence', 'value')
local counter = tonumber(redis.call('GET', KEYS[2]) or '0')
return {v[1], tonumber(v[2] or '0'), redis.call('PTTL', KEYS[1]), counter, v[3]}
)lua";

}  // namespace dlock::scripts
