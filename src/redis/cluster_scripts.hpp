// SPDX-License-Identifier: BSL-1.0
// The scripts of cluster_store: redis_store's, with each PUBLISH made SPUBLISH and each
// PUBSUB NUMSUB made PUBSUB SHARDNUMSUB (sharded()): a release or a grant reaches only the
// subscribers of the shard owning the channel's slot (Redis 7.0+), where cluster_store's
// watches subscribe, instead of being broadcast to every node.
#pragma once

#include <string>
#include <string_view>

namespace dlock::cluster_scripts {

/// A redis_store script with its pub/sub calls made sharded (its channels are in the slot of
/// the script's keys, as every name of a lock is: src/redis/keys.hpp).
inline std::string sharded(std::string_view body)
{
    std::string out(body);
    auto replace_all = [&out](std::string_view from, std::string_view to) {
        for (auto at = out.find(from); at != std::string::npos; at = out.find(from, at + to.size()))
            out.replace(at, from.size(), to);
    };
    replace_all("redis.call('PUBLISH'", "redis.call('SPUBLISH'");
    replace_all("'PUBSUB', 'NUMSUB'", "'PUBSUB', 'SHARDNUMSUB'");
    return out;
}

}  // namespace dlock::cluster_scripts
