// SPDX-License-Identifier: BSL-1.0
// A release: the token's node deleted, in token order; a create whose reply was lost is
// found by its guid first, and a delete lost with its connection is asked again while the
// session lives.
#include "zookeeper/store_impl.hpp"

#include <zookeeper/zookeeper.h>

namespace dlock {

using boost::system::error_code;
using dlock::detail::post_completion;
using std::chrono::milliseconds;
namespace recipe = zookeeper::recipe;
using any_release_handler = boost::asio::any_completion_handler<store::bool_signature>;

// `again`: asked again after a reply lost with its connection (release_later).
void zookeeper_store::impl::release(const lease_key& k, any_release_handler h, bool again)
{
    key_pair key{k.name, k.token};
    queue.drop(k.name, k.token);
    if (closed)
        return post_completion(ex, std::move(h), error_code(error::closed), false);
    auto hp = std::make_shared<any_release_handler>(std::move(h));
    if (order.busy(key))
        return order.after(key, [self = shared_from_this(), k, hp] { self->release(k, std::move(*hp)); });
    permit_waits.erase(key);
    if (leases.count(key) && zk && session_id)
        return release_lease(k, hp, again);  // a semaphore's lease first, then its `locks` node
    leases.erase(key);
    auto it = nodes.find(key);
    std::string node = it != nodes.end() ? it->second.node : std::string();
    if (node.empty() && it != nodes.end() && it->second.uncertain && zk)
        return find_lost_node(k, hp);
    if (node.empty() || !zk || !session_id) {
        nodes.erase(key);
        return post_completion(ex, std::move(*hp), error_code(), false);
    }
    zk->remove(node, [self = shared_from_this(), k, key, held = it->second.held, hp, again, sid = session_id](int rc) {
        if (self->release_later(rc, sid, k, hp))
            return;
        if (rc != ZOK && rc != ZNONODE)
            return post_completion(self->ex, std::move(*hp), self->to_error(rc, "delete"), false);
        self->nodes.erase(key);
        // Gone when asked again: most likely the first delete, whose reply was lost, did it.
        bool was = (rc == ZOK || (again && rc == ZNONODE)) && held;
        if (was)  // this store's tokened watchers hear it here (an untokened one through its watch)
            self->watches.tell_tokens(k.name, k.token, watch_event::released);
        post_completion(self->ex, std::move(*hp), error_code(), was);
    });
}

// A create whose reply was lost may have made a node: found by the guid, on a server synced
// with the leader (this one may not have applied it yet), then released.
void zookeeper_store::impl::find_lost_node(const lease_key& k, const release_ptr& hp)
{
    auto path = round_path(k.name, k.kind);
    zk->sync(path, [](int) {});  // its failure fails the read behind it too
    zk->get_children(
        path, [self = shared_from_this(), k, path, hp, sid = session_id](int rc, std::vector<std::string> c) {
            if (self->release_later(rc, sid, k, hp))
                return;
            if (rc != ZOK && rc != ZNONODE)
                return post_completion(self->ex, std::move(*hp), self->to_error(rc, "children of " + path), false);
            auto pos = recipe::find(recipe::contenders(std::move(c)), k.token, sid);
            key_pair key{k.name, k.token};
            if (pos.found) {
                auto& ns = self->nodes[key];
                ns.uncertain = false;
                ns.node = path + "/" + pos.node;
            } else {
                self->nodes.erase(key);
            }
            self->release(k, std::move(*hp));
        });
}

// The connection went under a release while the session lives on, and its node with it:
// that node would stay in front of every contender. Asked again until the session is
// answered or gone (its end deletes the node; the deadline timer bounds the wait).
bool zookeeper_store::impl::release_later(int rc, std::int64_t sid, const lease_key& k, const release_ptr& hp)
{
    if ((rc != ZCONNECTIONLOSS && rc != ZOPERATIONTIMEOUT) || closed || !sid || session_id != sid)
        return false;
    auto t = std::make_shared<boost::asio::steady_timer>(ex, std::max(milliseconds(10), timeout / 20));
    t->async_wait([self = shared_from_this(), t, k, hp](error_code) { self->release(k, std::move(*hp), true); });
    return true;
}

}  // namespace dlock
