// SPDX-License-Identifier: BSL-1.0
// The Lua script redlock_store adds to redis_store's: the fencing-counter update.
#pragma once

namespace dlock::scripts {

// KEYS: fence, lock. ARGV: T, token. Raises the slot's counter to at least T (never lowers
// it), and if the lease is held by `token`, records T as its token (so a retry with the same
// token reads T back). -> 1 if the lease is held by `token` here, else 0.
inline constexpr const char* raise_fence = R"lua(
local t = tonumber(ARGV[1])
if tonumber(redis.call('GET', KEYS[1]) or '0') < t then
  redis.call('SET', KEYS[1], ARGV[1])
end
if redis.call('HGET', KEYS[2], 'owner') == ARGV[2] then
  redis.call('HSET', KEYS[2], 'fence', ARGV[1])
  return 1
end
return 0
)lua";

}  // namespace dlock::scripts
