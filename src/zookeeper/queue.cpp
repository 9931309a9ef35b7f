// SPDX-License-Identifier: BSL-1.0
// A queued token waits for the node before its own to go (Curator's recipe). The kit's
// machine (common/predecessor_wait.hpp) decides; here the children are read, the
// predecessor read with a watch, and the first node a grant told to the token's watcher.
// ZooKeeper's watches are one-shot: one that fires for a node no longer watched is ignored.
#include "zookeeper/store_impl.hpp"

#include <zookeeper/zookeeper.h>

namespace dlock {

using boost::system::error_code;
using dlock::detail::ms_until;
using dlock::detail::predecessor_wait;
using dlock::detail::wait_action;
using zookeeper::detail::node_stat;
namespace recipe = zookeeper::recipe;

void zookeeper_store::impl::start_queued(const std::string& name, const std::string& token, const std::string& path,
                                         milliseconds ttl, bool permit)
{
    if (queue.find(name, token))
        return;  // already waiting
    auto q = std::make_shared<queued>();
    q->name = name;
    q->token = token;
    q->path = path;
    q->ttl = ttl;
    q->permit = permit;
    q->session = session_id;
    queue.start(q);
}

void zookeeper_store::impl::perform(const queued_ptr& q, const wait_action& a)
{
    using type = wait_action::type;
    switch (a.t) {
    case type::check: return read_place(q);
    case type::watch: return watch_predecessor(q, a.key);
    case type::grant: return grant_queued(q);
    case type::resync: return void(watches.tell(q->name, q->token, watch_event::resync));
    case type::cancel_watch:  // one-shot: it fires once more, into a key no longer watched
    case type::set_timer:     // never asked: without retries a failure ends the wait
    case type::cancel_timer: return;
    }
}

// Where our node stands now (it may have been a waiter before us that went).
void zookeeper_store::impl::read_place(const queued_ptr& q)
{
    if (!watches.watched(q->name, q->token))
        return queue.feed(q, [](predecessor_wait& w) { w.on_abandon(); });
    if (!zk || session_id != q->session)
        return queue.feed(q, [](predecessor_wait& w) { w.on_lost(); });
    zk->get_children(q->path, [self = shared_from_this(), q](int rc, std::vector<std::string> children) {
        if (self->closed)
            return;
        if (self->session_id != q->session)
            return self->queue.feed(q, [](predecessor_wait& w) { w.on_lost(); });
        auto pos = recipe::find(recipe::contenders(std::move(children)), q->token, q->session);
        self->queue.feed(q, [&](predecessor_wait& w) {
            if (rc != ZOK)
                w.on_check_failed();  // the waiter asks again
            else if (!pos.found)
                w.on_gone();  // withdrawn or gone
            else if (pos.first)
                w.on_first();
            else
                w.on_behind(pos.predecessor, 0);
        });
    });
}

// The read and the watch are one request: nothing can go unseen between them.
void zookeeper_store::impl::watch_predecessor(const queued_ptr& q, const std::string& pred)
{
    zk->get(
        q->path + "/" + pred,
        [self = shared_from_this(), q, pred](int rc, std::string, node_stat) {
            self->queue.feed(q, [&](predecessor_wait& w) {
                if (rc == ZNONODE)
                    w.on_predecessor_gone(pred);  // gone between the two reads
                else if (rc != ZOK)
                    w.on_watch_failed(pred);
            });
        },
        [w = weak_from_this(), q, pred](int) {
            if (auto s = w.lock())
                s->queue.feed(q, [&](predecessor_wait& x) { x.on_predecessor_gone(pred); });
        });
}

void zookeeper_store::impl::grant_queued(const queued_ptr& q)
{
    if (q->permit)  // first under a semaphore's `locks`: its next attempt takes a lease
        return void(watches.tell(q->name, q->token, watch_event::resync));
    auto& ns = nodes[{q->name, q->token}];
    ns.held = true;
    if (!ns.czxid)
        return void(watches.tell(q->name, q->token, watch_event::resync));  // our node's czxid unknown: ask again
    grant_notice g{static_cast<std::uint64_t>(ns.czxid), std::min(q->ttl, ms_until(deadline(), clock_type::now())),
                   ns.node, static_cast<std::uint64_t>(q->session)};
    watches.tell(q->name, q->token, watch_event::granted, std::move(g));
}

}  // namespace dlock
