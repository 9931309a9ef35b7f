// SPDX-License-Identifier: BSL-1.0
#include "etcd_model.hpp"

namespace dlock::sim {

std::int64_t etcd_model::grant(milliseconds ttl)
{
    auto id = ++next_lease_;
    leases_[id] = {ttl, w_.now() + ttl};
    arm_expiry(id);
    return id;
}

bool etcd_model::keepalive(std::int64_t lease)
{
    auto it = leases_.find(lease);
    if (it == leases_.end())
        return false;
    it->second.expires = w_.now() + it->second.ttl;
    arm_expiry(lease);
    return true;
}

// The lessor deletes an expired lease's keys when its time comes.
void etcd_model::arm_expiry(std::int64_t lease)
{
    auto at = leases_[lease].expires;
    w_.at(at, [this, lease, at] {
        auto it = leases_.find(lease);
        if (it != leases_.end() && it->second.expires == at)
            revoke(lease);
    });
}

void etcd_model::revoke(std::int64_t lease)
{
    leases_.erase(lease);
    for (auto& [k, kv] : std::map(keys_))
        if (kv.lease == lease)
            erase(k);
}

void etcd_model::erase(const std::string& key)
{
    keys_.erase(key);
    ++revision_;
    for (auto& [conn, k] : std::set(watches_))
        if (k == key && on_deleted)
            on_deleted(conn, key);
}

std::optional<etcd_model::key_value> etcd_model::first() const
{
    std::optional<key_value> out;
    for (auto& [k, kv] : keys_)
        if (!out || kv.create < out->create)
            out = kv;
    return out;
}

etcd_model::acquire_reply etcd_model::acquire(const std::string& key, const std::string& value, std::int64_t lease,
                                              bool queued)
{
    acquire_reply r;
    bool put = queued ? !keys_.count(key) : keys_.empty();
    if (put) {
        if (!leases_.count(lease)) {
            r.lease_gone = true;
            return r;
        }
        keys_[key] = {key, value, ++revision_, lease};
    }
    if (auto it = keys_.find(key); it != keys_.end())
        r.mine = it->second;
    r.owner = first();
    return r;
}

bool etcd_model::owns(const std::string& key, std::int64_t created, const std::string& value) const
{
    auto it = keys_.find(key);
    return it != keys_.end() && (created ? it->second.create == created : it->second.value == value);
}

etcd_model::confirm_reply etcd_model::confirm(const std::string& key, std::int64_t created,
                                              const std::string& value) const
{
    if (!owns(key, created, value))
        return {};
    return {true, keys_.size()};
}

std::pair<bool, bool> etcd_model::release(const std::string& key, std::int64_t created, const std::string& value)
{
    if (!owns(key, created, value))
        return {false, false};
    bool held = first()->key == key;
    erase(key);
    return {true, held};
}

etcd_model::place etcd_model::predecessor(const std::string& key, std::int64_t mine) const
{
    place p;
    p.revision = revision_;
    auto it = keys_.find(key);
    p.mine_exists = it != keys_.end() && it->second.create == mine;
    if (!p.mine_exists)
        return p;
    std::int64_t best = 0;
    for (auto& [k, kv] : keys_)
        if (kv.create < mine && kv.create > best) {
            best = kv.create;
            p.predecessor = k;
        }
    return p;
}

std::int64_t etcd_model::watch(int conn, const std::string& key)
{
    watches_.insert({conn, key});
    return revision_;
}

void etcd_model::unwatch_all(int conn)
{
    for (auto it = watches_.begin(); it != watches_.end();)
        it = it->first == conn ? watches_.erase(it) : std::next(it);
}

void etcd_model::leader_change()
{
    for (auto& [id, l] : leases_) {
        l.expires = w_.now() + l.ttl;
        arm_expiry(id);
    }
}

std::string etcd_model::leftovers() const
{
    if (!keys_.empty())
        return "the key " + keys_.begin()->first;
    if (!watches_.empty())
        return "a watch of " + watches_.begin()->second;
    return {};
}

}  // namespace dlock::sim
