// SPDX-License-Identifier: BSL-1.0
#include "zk_model.hpp"

#include <cstdio>

namespace dlock::sim {

std::int64_t zk_model::open_session(milliseconds timeout)
{
    auto id = ++next_session_;
    sessions_[id] = {timeout, w_.now()};
    arm_expiry(id);
    return id;
}

bool zk_model::heard(std::int64_t session)
{
    auto it = sessions_.find(session);
    if (it == sessions_.end())
        return false;
    it->second.last = w_.now();
    return true;
}

// The servers expire a session nothing was heard from for its timeout.
void zk_model::arm_expiry(std::int64_t session)
{
    auto& s = sessions_[session];
    w_.at(s.last + s.timeout, [this, session] {
        auto it = sessions_.find(session);
        if (it == sessions_.end())
            return;
        if (w_.now() < it->second.last + it->second.timeout)
            return arm_expiry(session);
        close_session(session);
    });
}

void zk_model::close_session(std::int64_t session)
{
    sessions_.erase(session);
    for (auto& [name, n] : std::map(nodes_))
        if (n.owner == session)
            erase(name);
}

std::optional<std::pair<std::string, std::int64_t>> zk_model::create(const std::string& prefix, const std::string& data,
                                                                     std::int64_t session)
{
    if (!heard(session))
        return std::nullopt;
    char seq[16];
    std::snprintf(seq, sizeof seq, "%010lld", static_cast<long long>(cversion_++));
    auto name = prefix + seq;
    nodes_[name] = {++zxid_, session, data};
    return std::pair(name, zxid_);
}

std::vector<std::string> zk_model::children() const
{
    std::vector<std::string> out;
    for (auto& [name, n] : nodes_)
        out.push_back(name);
    return out;
}

std::optional<zk_model::node> zk_model::get(const std::string& name) const
{
    auto it = nodes_.find(name);
    if (it == nodes_.end())
        return std::nullopt;
    return it->second;
}

bool zk_model::remove(const std::string& name)
{
    if (!nodes_.count(name))
        return false;
    erase(name);
    return true;
}

void zk_model::erase(const std::string& name)
{
    nodes_.erase(name);
    ++zxid_;  // the sequence does not move: the differential test showed ZooKeeper 3.8 keeps it
    for (auto& [conn, n] : std::set(watches_))
        if (n == name) {
            watches_.erase({conn, n});  // one-shot
            if (on_deleted)
                on_deleted(conn, name);
        }
}

bool zk_model::watch(int conn, const std::string& name)
{
    if (!nodes_.count(name))
        return false;
    watches_.insert({conn, name});
    return true;
}

void zk_model::unwatch_all(int conn)
{
    for (auto it = watches_.begin(); it != watches_.end();)
        it = it->first == conn ? watches_.erase(it) : std::next(it);
}

std::string zk_model::leftovers() const
{
    if (!nodes_.empty())
        return "the node " + nodes_.begin()->first;
    return {};
}

}  // namespace dlock::sim
