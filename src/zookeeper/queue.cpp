// SPDX-License-Identifier: BSL-1.0
// A queued token waits for the node before its own to go (Curator's recipe): the children
// read, the predecessor watched, and the first node a grant told to the token's watcher.
#include "zookeeper/store_impl.hpp"

#include <zookeeper/zookeeper.h>

namespace dlock {

using boost::system::error_code;
using dlock::detail::ms_until;
using zookeeper::detail::node_stat;
namespace recipe = zookeeper::recipe;

void zookeeper_store::impl::start_queued(const std::string& name, const std::string& token, milliseconds ttl)
{
    auto& slot = queue[{name, token}];
    if (slot && !slot->done)
        return;
    slot = std::make_shared<queued>();
    slot->name = name;
    slot->token = token;
    slot->path = path_of(name);
    slot->ttl = ttl;
    slot->session = session_id;
    recheck(slot);
}

void zookeeper_store::impl::drop_queued(const std::shared_ptr<queued>& q, std::optional<watch_event> tell)
{
    q->done = true;
    auto it = queue.find({q->name, q->token});
    if (it != queue.end() && it->second == q)
        queue.erase(it);
    if (tell)
        watches.tell(q->name, q->token, *tell);
}

void zookeeper_store::impl::drop_queued(const key_pair& k)
{
    if (auto q = queue.find(k); q != queue.end())
        drop_queued(q->second, std::nullopt);
}

// Where our node stands now (it may have been a waiter before us that went).
void zookeeper_store::impl::recheck(const std::shared_ptr<queued>& q)
{
    if (q->done)
        return;
    if (!watches.watched(q->name, q->token))
        return drop_queued(q, std::nullopt);
    if (!zk || session_id != q->session)
        return drop_queued(q, watch_event::resync);
    zk->get_children(q->path, [self = shared_from_this(), q](int rc, std::vector<std::string> children) {
        if (q->done || self->closed)
            return;
        if (rc != ZOK || self->session_id != q->session)
            return self->drop_queued(q, watch_event::resync);  // the waiter asks again
        auto sorted = recipe::contenders(std::move(children));
        self->on_place(q, recipe::find(sorted, q->token, q->session));
    });
}

void zookeeper_store::impl::on_place(const std::shared_ptr<queued>& q, const recipe::position& pos)
{
    if (!pos.found)
        return drop_queued(q, watch_event::resync);  // withdrawn or gone
    if (pos.first) {
        auto& ns = nodes[{q->name, q->token}];
        ns.held = true;
        grant_notice g{static_cast<std::uint64_t>(ns.czxid), std::min(q->ttl, ms_until(deadline(), clock_type::now())),
                       ns.node, static_cast<std::uint64_t>(q->session)};
        drop_queued(q, std::nullopt);
        if (ns.czxid)
            watches.tell(q->name, q->token, watch_event::granted, std::move(g));
        else
            watches.tell(q->name, q->token, watch_event::resync);  // our node's czxid unknown: ask again
        return;
    }
    zk->get(
        q->path + "/" + pos.predecessor,
        [self = shared_from_this(), q](int rc, std::string, node_stat) {
            if (q->done)
                return;
            if (rc == ZNONODE)
                return self->recheck(q);  // gone between the two reads
            if (rc != ZOK)
                self->drop_queued(q, watch_event::resync);
        },
        [w = weak_from_this(), q](int) {
            if (auto s = w.lock(); s && !q->done)
                s->recheck(q);
        });
}

}  // namespace dlock
