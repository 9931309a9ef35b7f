// SPDX-License-Identifier: BSL-1.0
// A name's untokened watchers share one children watch of its lock path, re-armed on each
// change; a child gone since the last read is a release. No lock path yet: its creation is
// watched instead. An election's leader node is watched too: its data is the value it
// proclaims, and observers re-read the leader when it changes; so is a latch's node, whose
// data every count-down changes (its waiters read it again).
#include "zookeeper/latch_node.hpp"
#include "zookeeper/store_impl.hpp"

#include <zookeeper/zookeeper.h>

#include <algorithm>

namespace dlock {

using boost::system::error_code;
using zookeeper::detail::node_stat;
namespace recipe = zookeeper::recipe;

void zookeeper_store::impl::arm_name(const std::string& name)
{
    auto it = names.find(name);
    if (it == names.end() || closed)
        return;
    auto epoch = it->second.epoch = ++name_epochs;  // store-wide: a reply to a forgotten watch never matches
    ensure_session([self = shared_from_this(), name, epoch](error_code ec) {
        auto it = self->names.find(name);
        if (it == self->names.end() || it->second.epoch != epoch)
            return;
        if (ec)
            return;  // the watchers learn nothing until the next session: they fall back on their timers
        auto on_change = [w = self->weak_from_this(), name, epoch](int) {
            auto s = w.lock();
            if (!s)
                return;
            auto it = s->names.find(name);
            if (it != s->names.end() && it->second.epoch == epoch)
                s->arm_name(name);
        };
        self->zk->get_children(
            self->path_of(name),
            [self, name, epoch, on_change](int rc, std::vector<std::string> children) {
                auto it = self->names.find(name);
                if (it == self->names.end() || it->second.epoch != epoch)
                    return;
                // No lock path yet (or reaped): watch for its creation instead. Made meanwhile,
                // the exists sets a data watch (blind to children): read the children again.
                if (rc == ZNONODE)
                    self->zk->exists(
                        self->path_of(name),
                        [on_change](int rc, node_stat) {
                            if (rc == ZOK)
                                on_change(0);
                        },
                        on_change);
                auto sorted = recipe::contenders(children);
                if (rc == ZOK && !sorted.empty() &&
                    recipe::parse_contender(sorted.front())->kind == recipe::node_kind::latch)
                    self->watch_leader_value(name, self->path_of(name) + "/" + sorted.front());
                else if (rc == ZOK && zookeeper::latch_node::in(children))  // each count-down changes its data
                    self->watch_leader_value(name, self->latch_path(name));
                self->on_children(name, rc, std::move(children));
            },
            on_change);
    });
}

// The leader's data changed (a proclaimed value) or the node went: the watchers re-read.
// One such watch per leader node at a time (each children change re-reads the name: a
// watch armed at every read would pile up on a long-lived leader).
void zookeeper_store::impl::watch_leader_value(const std::string& name, const std::string& node)
{
    auto& nw = names.find(name)->second;  // the caller found it
    if (nw.leader_watched == node)
        return;
    nw.leader_watched = node;
    zk->get(
        node,
        [w = weak_from_this(), name, node](int rc, std::string data, node_stat) {
            auto s = w.lock();
            if (!s)
                return;
            auto it = s->names.find(name);
            if (it == s->names.end() || it->second.leader_watched != node)
                return;
            // A value set before this watch was: an observer's read may have come before it,
            // and no watch event will follow, so the watchers re-read now.
            if (rc == ZOK && !data.empty())
                s->watches.tell_name(name, watch_event::released);
            // Unanswered, the watch may not be set: the next read of the name arms it again.
            if (rc != ZOK)
                it->second.leader_watched.clear();
        },
        [w = weak_from_this(), name, node](int) {
            auto s = w.lock();
            if (!s)
                return;
            auto it = s->names.find(name);
            if (it == s->names.end())
                return;  // nobody watches the name any more
            if (it->second.leader_watched == node)
                it->second.leader_watched.clear();
            s->watches.tell_name(name, watch_event::released);
            s->arm_name(name);
        });
}

void zookeeper_store::impl::on_children(const std::string& name, int rc, std::vector<std::string> children)
{
    auto& nw = names.find(name)->second;  // the caller found it
    if (rc != ZOK && rc != ZNONODE)
        return watches.name_down(name, watch_event::resync);
    auto now = rc == ZOK ? recipe::contenders(std::move(children)) : std::vector<std::string>();
    bool gone = std::any_of(nw.last.begin(), nw.last.end(),
                            [&](const std::string& c) { return std::find(now.begin(), now.end(), c) == now.end(); });
    nw.last = std::move(now);
    watches.name_ready(name);
    if (gone)
        watches.tell_name(name, watch_event::released);
}

}  // namespace dlock
