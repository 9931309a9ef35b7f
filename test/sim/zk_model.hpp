// SPDX-License-Identifier: BSL-1.0
// One ZooKeeper ensemble as dlock's recipe uses it (Curator's InterProcessMutex layout):
// sessions that the servers expire when nothing is heard from them for their timeout
// (deleting their ephemeral nodes), the lock path's ephemeral sequential children with their
// czxids and owners, and one-shot watches of a child's deletion.
#pragma once

#include "world.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace dlock::sim {

class zk_model {
public:
    explicit zk_model(world& w) : w_(w) {}

    struct node {
        std::int64_t czxid = 0, owner = 0;
        std::string data;
    };

    std::int64_t open_session(milliseconds timeout);
    /// A request of the session reached a server: false if the session has expired.
    bool heard(std::int64_t session);
    void close_session(std::int64_t session);
    /// An ephemeral sequential child `prefix` + 10 digits: its name and czxid.
    std::optional<std::pair<std::string, std::int64_t>> create(const std::string& prefix, const std::string& data,
                                                               std::int64_t session);
    std::vector<std::string> children() const;
    std::optional<node> get(const std::string& name) const;
    bool remove(const std::string& name);
    /// A one-shot watch of `name`'s deletion for the connection `conn` (false: no such node).
    bool watch(int conn, const std::string& name);
    void unwatch_all(int conn);

    std::function<void(int conn, const std::string& name)> on_deleted;
    std::string leftovers() const;

private:
    void arm_expiry(std::int64_t session);
    void erase(const std::string& name);

    struct session_row {
        milliseconds timeout;
        real_time last;
    };
    world& w_;
    std::int64_t zxid_ = 0x100000000, next_session_ = 0x1000000000000, cversion_ = 0;
    std::map<std::int64_t, session_row> sessions_;
    std::map<std::string, node> nodes_;
    std::set<std::pair<int, std::string>> watches_;
};

}  // namespace dlock::sim
