// SPDX-License-Identifier: BSL-1.0
// The Lua scripts of read-write locks and semaphores on redis_store: the lease-set protocol
// of src/core/lease_set.hpp, step by step. Leases are judged by the server's clock (TIME).
// KEYS (every script): holders (zset token -> expiry ms), info (hash token -> fence, plus
// ~cap: a semaphore's permits, ~w: the writer, ~c: the last refusal's time), fence
// counter, queue (list of tokens), queue-ttl (hash token -> "ttl kind"), the mutex's lock
// hash and the mutex's queue. The name's kind: while a set holds or queues anyone, the
// mutex's lock hash holds the field `set` ("0": a read-write lock, "N": a semaphore of N)
// and nothing else, with the set's expiry; the mutex's acquire (redis_scripts.hpp, and the
// no-scripting transactions) refuses such a name, and these scripts refuse a name whose
// lock hash has an owner or whose mutex queue exists.
#pragma once

namespace dlock::scripts {

// What every script of a set starts with (the store puts it in front of each body).
inline constexpr const char* set_prelude = R"lua(
local H, I, F, Q, QT, L, MQ = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local t0 = redis.call('TIME')
local now = tonumber(t0[1]) * 1000 + math.floor(tonumber(t0[2]) / 1000)
-- HDEL or ZREM of a list of any length (unpack stops at a few thousand values).
local function remove(cmd, key, list)
  for i = 1, #list, 1000 do
    redis.call(cmd, key, unpack(list, i, math.min(i + 999, #list)))
  end
end
local function purge()
  local gone = redis.call('ZRANGEBYSCORE', H, '-inf', now)
  if #gone == 0 then return end
  redis.call('ZREMRANGEBYSCORE', H, '-inf', now)
  remove('HDEL', I, gone)
  local w = redis.call('HGET', I, '~w')
  if w and not redis.call('ZSCORE', H, w) then redis.call('HDEL', I, '~w') end
end
local function admits(kind)
  if kind == 'p' then return redis.call('ZCARD', H) < tonumber(redis.call('HGET', I, '~cap') or '0') end
  if kind == 'r' then return redis.call('HEXISTS', I, '~w') == 0 end
  return redis.call('ZCARD', H) == 0
end
local function take(tok, kind, ttl)
  local fence = redis.call('INCR', F)
  redis.call('ZADD', H, now + ttl, tok)
  redis.call('HSET', I, tok, fence)
  if kind == 'w' then redis.call('HSET', I, '~w', tok) end
  return fence
end
-- Grants the queue's head while the set admits it, first come first served; a waiter whose
-- grant channel has no subscriber is gone. Returns the fence if `me` was granted.
local function serve(me, gp)
  local mine = false
  while true do
    local w = redis.call('LINDEX', Q, 0)
    if not w then break end
    local v = redis.call('HGET', QT, w)
    local ttl, kind
    if v then ttl, kind = string.match(v, '^(%d+) (%a)$') end
    local drop = not kind or redis.call('ZSCORE', H, w)
    if not drop and w ~= me then
      local n = redis.pcall('PUBSUB', 'NUMSUB', gp .. w)
      drop = not (n.err or n[2] > 0)
    end
    if drop then
      redis.call('LPOP', Q)
      redis.call('HDEL', QT, w)
    elseif admits(kind) then
      redis.call('LPOP', Q)
      redis.call('HDEL', QT, w)
      ttl = tonumber(ttl)
      local fence = take(w, kind, ttl)
      if w == me then
        mine = fence
      else
        redis.call('PUBLISH', gp .. w, string.format('%d %d', fence, ttl))
      end
    else
      break
    end
  end
  return mine
end
-- The keys live as long as the longest lease or the queue; nothing is left once both end.
-- So does the kind's mark in the lock hash (never a mutex's hash: that has no `set`).
local function keep()
  local last = redis.call('ZRANGE', H, -1, -1, 'WITHSCORES')
  local left = -1
  if #last > 0 then left = tonumber(last[2]) - now end
  local q = redis.call('PTTL', Q)
  if q > left then left = q end
  local marked = redis.call('HEXISTS', L, 'set') == 1
  if left > 0 then
    redis.call('PEXPIRE', H, left)
    redis.call('PEXPIRE', I, left)
    if marked then redis.call('PEXPIRE', L, left) end
  else
    redis.call('DEL', H, I)
    if marked then redis.call('DEL', L) end
  end
end
purge()
)lua";

// ARGV: token, ttl_ms, kind ('r', 'w', 'p'), permits, grant channel prefix, "1" to queue.
// -> {1, fence} taken; {0, soonest holder's remaining ms or -1} refused; {-1, what the name
// is}: another primitive or a semaphore of another size (-1: a mutex, held or queued; 0: a
// read-write lock; N: a semaphore of N permits).
inline constexpr const char* set_acquire = R"lua(
local tok, ttl, kind = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local want = '0'
if kind == 'p' then want = ARGV[4] end
local mark = redis.call('HMGET', L, 'owner', 'set')
if mark[2] then
  if mark[2] ~= want then return {-1, tonumber(mark[2])} end
elseif mark[1] or redis.call('EXISTS', MQ) == 1 then
  return {-1, -1}
end
local cap = redis.call('HGET', I, '~cap')
if kind == 'p' then
  if cap and cap ~= ARGV[4] then return {-1, tonumber(cap)} end
  if not cap then
    if redis.call('EXISTS', H) == 1 or redis.call('EXISTS', Q) == 1 then return {-1, 0} end
    redis.call('HSET', I, '~cap', ARGV[4])
  end
elseif cap then
  return {-1, tonumber(cap)}
end
-- Marked before anything is taken or queued; keep() gives the mark the set's expiry.
if not mark[2] then redis.call('HSET', L, 'set', want) end
local f = redis.call('HGET', I, tok)
if f and redis.call('ZSCORE', H, tok) then
  redis.call('ZADD', H, now + ttl, tok)
  if redis.call('HDEL', QT, tok) == 1 then redis.call('LREM', Q, 0, tok) end
  keep()
  return {1, tonumber(f)}
end
local mine = serve(tok, ARGV[5])
if mine then
  keep()
  return {1, mine}
end
if redis.call('LLEN', Q) == 0 and admits(kind) then
  local fence = take(tok, kind, ttl)
  keep()
  return {1, fence}
end
redis.call('HSET', I, '~c', now)
local first = redis.call('ZRANGE', H, 0, 0, 'WITHSCORES')
local wait = -1
if #first > 0 then wait = tonumber(first[2]) - now end
if ARGV[6] == '1' then
  if redis.call('HSET', QT, tok, ARGV[2] .. ' ' .. kind) == 1 then redis.call('RPUSH', Q, tok) end
  -- A live waiter re-queues within its own lease after the last holder's lease ends.
  local last = redis.call('ZRANGE', H, -1, -1, 'WITHSCORES')
  local k = ttl
  if #last > 0 then k = k + tonumber(last[2]) - now end
  for _, key in ipairs({Q, QT}) do
    if redis.call('PTTL', key) < k then redis.call('PEXPIRE', key, k) end
  end
end
keep()
return {0, wait}
)lua";

// ARGV: token, ttl_ms. -> 0 not ours; 1 ours; 2 ours, and someone waits or was refused
// within the last lease.
inline constexpr const char* set_renew = R"lua(
if not redis.call('ZSCORE', H, ARGV[1]) then return 0 end
local ttl = tonumber(ARGV[2])
redis.call('ZADD', H, now + ttl, ARGV[1])
keep()
local c = tonumber(redis.call('HGET', I, '~c') or '-1')
if redis.call('LLEN', Q) > 0 or (c >= 0 and now - c < ttl) then return 2 end
return 1
)lua";

// ARGV: token, release channel, grant channel prefix[, the operator's override: "1" every
// lease, "r" every reader, "w" the writer]. Frees the lease and serves the queue; a token
// that does not hold is withdrawn. Wakes the waiters that did not queue when nobody queued
// is left. -> 1 freed, 0 not held.
inline constexpr const char* set_release = R"lua(
local force = ARGV[4]
if force == '1' or force == 'r' or force == 'w' then
  local gone = redis.call('ZRANGE', H, 0, -1)
  local w = redis.call('HGET', I, '~w')
  if force == 'w' then
    gone = {}
    if w then gone = {w} end
  elseif force == 'r' then
    -- A semaphore has no readers; a read-write lock's readers are every holder but the writer.
    if redis.call('HEXISTS', I, '~cap') == 1 then gone = {} end
    for i = #gone, 1, -1 do
      if gone[i] == w then table.remove(gone, i) end
    end
  end
  remove('ZREM', H, gone)
  remove('HDEL', I, gone)
  if force ~= 'r' then redis.call('HDEL', I, '~w') end
  serve('', ARGV[3])
  keep()
  -- One side that freed nothing (a mutex's name, or no such holder) wakes nobody.
  if #gone > 0 or force == '1' then redis.call('PUBLISH', ARGV[2], 'released') end
  if #gone > 0 then return 1 end
  return 0
end
if not redis.call('ZSCORE', H, ARGV[1]) then
  if redis.call('HDEL', QT, ARGV[1]) == 1 then redis.call('LREM', Q, 0, ARGV[1]) end
  keep()
  return 0
end
redis.call('ZREM', H, ARGV[1])
redis.call('HDEL', I, ARGV[1])
if redis.call('HGET', I, '~w') == ARGV[1] then redis.call('HDEL', I, '~w') end
serve('', ARGV[3])
keep()
if redis.call('LLEN', Q) == 0 then redis.call('PUBLISH', ARGV[2], 'released') end
return 1
)lua";

// -> {holder with the highest fence or false, that fence, longest remaining ms or -1,
// counter, queued, holders, writer (0/1), permits (0: not a semaphore)}
inline constexpr const char* set_status = R"lua(
local all = redis.call('ZRANGE', H, 0, -1, 'WITHSCORES')
local top, holder, left = 0, false, -1
for i = 1, #all, 2 do
  local f = tonumber(redis.call('HGET', I, all[i]) or '0')
  if f > top then top, holder = f, all[i] end
  local l = tonumber(all[i + 1]) - now
  if l > left then left = l end
end
local cap = tonumber(redis.call('HGET', I, '~cap') or '0')
local counter = tonumber(redis.call('GET', F) or '0')
return {holder, top, left, counter, redis.call('LLEN', Q), #all / 2, redis.call('HEXISTS', I, '~w'), cap}
)lua";

}  // namespace dlock::scripts
