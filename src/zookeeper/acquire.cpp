// SPDX-License-Identifier: BSL-1.0
// An acquire round: an ephemeral sequential node (Curator's layout) and the children read
// behind it, judged together by judge() (acquire_round.hpp) and carried out here.
#include "core/kind_text.hpp"
#include "zookeeper/latch_node.hpp"
#include "zookeeper/semaphore_layout.hpp"
#include "zookeeper/store_impl.hpp"

#include <zookeeper/zookeeper.h>

namespace dlock {

using boost::system::error_code;
using dlock::detail::ms_until;
using std::chrono::milliseconds;
using zookeeper::acquire_next;
using zookeeper::acquire_round;
using zookeeper::reply;
using zookeeper::detail::node_stat;
using zookeeper::detail::reply_of;
namespace recipe = zookeeper::recipe;
using any_acquire_handler = boost::asio::any_completion_handler<store::acquire_signature>;

namespace {

recipe::node_kind node_kind_of(lease_kind k)
{
    switch (k) {
    case lease_kind::read: return recipe::node_kind::read;
    case lease_kind::write: return recipe::node_kind::write;
    case lease_kind::leader: return recipe::node_kind::latch;
    default: return recipe::node_kind::lock;
    }
}

}  // namespace

lease_kind zookeeper::detail::lease_kind_of(recipe::node_kind k)
{
    switch (k) {
    case recipe::node_kind::lock: return lease_kind::mutex;
    case recipe::node_kind::latch: return lease_kind::leader;
    default: return lease_kind::read;
    }
}

reply zookeeper::detail::reply_of(int rc)
{
    switch (rc) {
    case ZOK: return reply::ok;
    case ZNONODE: return reply::no_node;
    case ZCONNECTIONLOSS:
    case ZOPERATIONTIMEOUT: return reply::lost;
    default: return reply::failed;
    }
}

std::string zookeeper_store::impl::path_of(const std::string& name) const
{
    std::string why;
    return recipe::lock_path(cfg.root, name, why);
}

std::string zookeeper_store::impl::round_path(const std::string& name, lease_kind kind) const
{
    auto path = path_of(name);
    return kind == lease_kind::permit ? path + "/" + std::string(zookeeper::semaphore_layout::locks) : path;
}

void zookeeper_store::impl::acquire(const lease_request& req, any_acquire_handler h, bool retried)
{
    if (!retried)
        order.begin({req.name, req.token});
    auto hp = std::make_shared<any_acquire_handler>(std::move(h));
    ensure_session([self = shared_from_this(), req, retried, hp](error_code ec) {
        if (ec)
            return self->acquired(req, std::move(*hp), ec, acquire_result{});
        self->send_acquire(req, std::move(*hp), retried);
    });
}

// Completes an acquire, then lets the releases of its token that waited for it go.
void zookeeper_store::impl::acquired(const lease_request& req, any_acquire_handler h, error_code ec, acquire_result res)
{
    dlock::detail::post_completion(ex, std::move(h), ec, std::move(res));
    for (auto& f : order.end({req.name, req.token}))
        f();
}

void zookeeper_store::impl::send_acquire(const lease_request& req, any_acquire_handler h, bool retried,
                                         bool parents_made)
{
    if (!zk || !session_id) {  // the session went between two steps of this acquire
        if (!retried)
            return acquire(req, std::move(h), true);
        return acquired(req, std::move(h), error::connection_lost, acquire_result{});
    }
    round_ctx c{
        req,         round_path(req.name, req.kind), {req.name, req.token}, session_id, clock_type::now(), retried,
        parents_made};
    auto hp = std::make_shared<any_acquire_handler>(std::move(h));
    if (req.kind == lease_kind::permit)  // a permit held already: the same answer again
        if (auto it = leases.find(c.key); it != leases.end() && it->second.held)
            return grant_permit(c, hp);
    auto& ns = nodes[c.key];
    if (ns.uncertain)
        return find_lost_create(c, hp);
    auto st = std::make_shared<round_replies>();
    auto evaluate = [self = shared_from_this(), c, hp, st] {
        if (st->create_rc == 1 || st->children_rc == 1)
            return;  // the other reply is still due
        self->judge_round(c, hp, *st);
    };
    if (!ns.node.empty()) {
        st->create_rc = 0;  // ours exists: look where it stands
    } else {
        st->create_sent = true;
        // A candidate's data is the value it proclaims (LeaderLatch's participant id): none yet.
        auto data = req.kind == lease_kind::leader ? std::string() : req.token;
        zk->create(c.path + "/" + recipe::node_prefix(req.token, c.sid, node_kind_of(req.kind)), data,
                   ZOO_EPHEMERAL_SEQUENTIAL, [st, evaluate](int rc, std::string node, node_stat s) {
                       st->create_rc = rc;
                       st->node = std::move(node);
                       st->stat = s;
                       evaluate();
                   });
    }
    // Pipelined behind the create: the same session reads its own write.
    zk->get_children(c.path, [st, evaluate](int rc, std::vector<std::string> children) {
        st->children_rc = rc == ZNONODE && st->create_rc == ZNONODE ? ZOK : rc;
        st->children = std::move(children);
        evaluate();
    });
}

// A create whose reply was lost: found by its guid before creating again, on a server synced
// with the leader (this one may not have applied it yet).
void zookeeper_store::impl::find_lost_create(const round_ctx& c, const acquire_ptr& hp)
{
    zk->sync(c.path, [](int) {});  // its failure fails the read behind it too
    zk->get_children(c.path, [self = shared_from_this(), c, hp](int rc, std::vector<std::string> children) {
        if (rc != ZOK && rc != ZNONODE)
            return self->acquired(c.req, std::move(*hp), self->to_error(rc, "children of " + c.path), acquire_result{});
        auto pos = recipe::find(recipe::contenders(std::move(children)), c.req.token, c.sid);
        auto& ns = self->nodes[c.key];
        ns.uncertain = false;
        if (pos.found)
            ns.node = c.path + "/" + pos.node, ns.czxid = 0;
        else
            ns.node.clear();
        self->send_acquire(c.req, std::move(*hp), c.retried, c.parents_made);
    });
}

// What an acquire round's replies mean is judge()'s (acquire_round.hpp); doing it is this.
void zookeeper_store::impl::judge_round(const round_ctx& c, const acquire_ptr& hp, round_replies& st)
{
    acquire_round r{.closed = closed,
                    .same_session = session_id == c.sid,
                    .retried = c.retried,
                    .parents_made = c.parents_made,
                    .queue = c.req.queue,
                    .create = st.create_sent ? reply_of(st.create_rc) : reply::not_sent,
                    .children = reply_of(st.children_rc)};
    // A node this round made is ours whatever comes next: a release must find it.
    if (!closed && r.same_session && r.create == reply::ok && !st.node.empty())
        nodes[c.key] = node_state{.node = st.node, .czxid = st.stat.czxid};
    std::vector<std::string> sorted;
    if (r.children == reply::ok) {
        sorted = recipe::contenders(st.children);  // the children stay: a semaphore is looked for in them
        r.pos = recipe::find(sorted, c.req.token, c.sid);
    }
    auto known = nodes.find(c.key);
    r.czxid_known = known != nodes.end() && !known->second.node.empty() && known->second.czxid != 0;
    const auto& req = c.req;
    auto next = judge(r);
    // Our node stands among the contenders: once, a semaphore's nodes under the name are looked at.
    bool placed = next == acquire_next::held || next == acquire_next::queued || next == acquire_next::withdraw;
    if (placed && req.kind != lease_kind::permit && !nodes[c.key].kind_checked) {
        if (!st.latch_checked && zookeeper::latch_node::in(st.children))
            return check_latch(c, hp, std::make_shared<round_replies>(std::move(st)));
        if (!st.semaphore_checked && zookeeper::semaphore_layout::has_semaphore(st.children))
            return check_semaphore(c, hp, std::make_shared<round_replies>(std::move(st)));
        nodes[c.key].kind_checked = true;
    }
    switch (next) {
    case acquire_next::fail_closed: return acquired(req, std::move(*hp), error::closed, {});
    case acquire_next::start_over: return acquire(req, std::move(*hp), true);
    case acquire_next::fail_session_lost: return acquired(req, std::move(*hp), error::connection_lost, {});
    case acquire_next::make_parents: return make_lock_path(c, hp);
    case acquire_next::fail_create_uncertain:
        nodes[c.key].uncertain = true;  // it may exist: the guid finds it next time
        [[fallthrough]];
    case acquire_next::fail_create:
        return acquired(req, std::move(*hp), to_error(st.create_rc, "create in " + c.path), {});
    case acquire_next::fail_children:
        return acquired(req, std::move(*hp), to_error(st.children_rc, "children of " + c.path), {});
    case acquire_next::gone:
        nodes.erase(c.key);  // deleted under us (a forced release): nothing of ours is left
        if (req.kind == lease_kind::permit)
            return drop_permit(c, hp, error_code());  // nor may its lease count against the permits
        return acquired(req, std::move(*hp), error_code(), {});
    case acquire_next::check_owner: return check_owner(c, c.path + "/" + r.pos.node, hp);
    case acquire_next::held: return req.kind == lease_kind::permit ? take_permit(c, hp) : grant(c, hp);
    case acquire_next::queued:
    case acquire_next::withdraw: return not_first(c, sorted.size(), hp);
    case acquire_next::mismatch:
        set_text(dlock::detail::kind_in_use_text(zookeeper::detail::lease_kind_of(r.pos.foreign_kind)));
        return withdraw(c, hp, error::kind_mismatch);
    }
}

// A latch's node under the name: another kind of lock is refused unless it expired. Our
// node's create this round dates the servers' time now.
void zookeeper_store::impl::check_latch(const round_ctx& c, const acquire_ptr& hp, std::shared_ptr<round_replies> st)
{
    auto now = st->create_sent && st->create_rc == ZOK ? st->stat.mtime : 0;
    latch_in_use(c.req.name, now, [self = shared_from_this(), c, hp, st](bool in_use) {
        if (in_use) {
            self->set_text(std::string(zookeeper::latch_node::in_use_text));
            return self->withdraw(c, hp, error::kind_mismatch);
        }
        st->latch_checked = true;
        self->judge_round(c, hp, *st);
    });
}

// The node's parents: the root chain as persistent nodes, the lock path as a container.
void zookeeper_store::impl::make_parents(const std::string& path, std::function<void(int)> done, std::size_t containers)
{
    auto chain = std::make_shared<std::vector<std::string>>();
    for (auto at = path.find('/', 1); at != std::string::npos; at = path.find('/', at + 1))
        chain->push_back(path.substr(0, at));
    chain->push_back(path);
    make_parent(chain, 0, containers, std::move(done));
}

void zookeeper_store::impl::make_parent(std::shared_ptr<std::vector<std::string>> chain, std::size_t i,
                                        std::size_t containers, std::function<void(int)> done)
{
    if (i == chain->size() || !zk)
        return done(zk ? ZOK : ZCLOSING);
    int flags = i + containers >= chain->size() ? ZOO_CONTAINER : ZOO_PERSISTENT;
    zk->create((*chain)[i], "", flags,
               [self = shared_from_this(), chain, i, containers, done](int rc, std::string, node_stat) {
                   if (rc != ZOK && rc != ZNODEEXISTS)
                       return done(rc);
                   self->make_parent(chain, i + 1, containers, done);
               });
}

void zookeeper_store::impl::make_lock_path(const round_ctx& c, const acquire_ptr& hp)
{
    make_parents(
        c.path,
        [self = shared_from_this(), req = c.req, hp, retried = c.retried](int rc) {
            if (rc != ZOK && rc != ZNODEEXISTS)
                return self->acquired(req, std::move(*hp), self->to_error(rc, "creating the lock path"), {});
            self->send_acquire(req, std::move(*hp), retried, true);
        },
        c.req.kind == lease_kind::permit ? 2 : 1);
}

// In use as a semaphore while a lease or an acquirer is there; the names of the leases say
// how many permits dlock's users agreed on (Curator's say nothing).
void zookeeper_store::impl::check_semaphore(const round_ctx& c, const acquire_ptr& hp,
                                            std::shared_ptr<round_replies> st)
{
    namespace layout = zookeeper::semaphore_layout;
    auto base = path_of(c.req.name);
    auto seen = std::make_shared<std::pair<int, std::vector<std::string>>>(1, std::vector<std::string>{});
    auto waiting = std::make_shared<std::pair<int, int>>(1, 0);  // rc, the children of `locks`
    auto decide = [self = shared_from_this(), c, hp, st, seen, waiting] {
        if (seen->first == 1 || waiting->first == 1)
            return;
        if (int rc = seen->first != ZOK ? seen->first : waiting->first; rc != ZOK)
            return self->withdraw(c, hp, self->to_error(rc, "children of a semaphore"));
        st->semaphore_checked = true;
        if (seen->second.empty() && waiting->second == 0)
            return self->judge_round(c, hp, *st);  // empty containers the servers have not reaped yet
        std::optional<unsigned> permits;
        for (auto& l : seen->second)
            if (!permits)
                permits = layout::permits_of(l);
        self->set_text(permits ? dlock::detail::kind_in_use_text(lease_kind::permit, *permits)
                               : "dlock: the name is in use as a semaphore");
        self->withdraw(c, hp, error::kind_mismatch);
    };
    zk->get_children(base + "/" + std::string(layout::leases), [seen, decide](int rc, std::vector<std::string> ls) {
        seen->first = rc == ZNONODE ? ZOK : rc;
        seen->second = std::move(ls);
        decide();
    });
    zk->exists(base + "/" + std::string(layout::locks), [waiting, decide](int rc, node_stat s) {
        *waiting = {rc == ZNONODE ? ZOK : rc, rc == ZOK ? s.num_children : 0};
        decide();
    });
}

// Found by its guid after a lost reply: its czxid first, and only if this session owns it
// (a node of a session given up is never adopted); then the round again.
void zookeeper_store::impl::check_owner(const round_ctx& c, const std::string& node, const acquire_ptr& hp)
{
    nodes[c.key].node = node;
    zk->exists(node, [self = shared_from_this(), c, hp](int rc, node_stat s) {
        if (rc == ZOK && s.ephemeral_owner == c.sid && self->session_id == c.sid)
            self->nodes[c.key].czxid = s.czxid;
        else if (rc == ZOK || rc == ZNONODE)
            self->nodes.erase(c.key);  // gone, or not this session's: not ours to keep
        else                           // unanswered: it stays ours, for the release that follows the error
            return self->acquired(c.req, std::move(*hp), self->to_error(rc, "checking our node"), {});
        self->send_acquire(c.req, std::move(*hp), c.retried, true);
    });
}

// Ours is the first node: the lock, good until the session's deadline at the most.
void zookeeper_store::impl::grant(const round_ctx& c, const acquire_ptr& hp)
{
    auto& ns = nodes[c.key];
    ns.held = true;
    acquire_result res;
    res.acquired = true;
    res.fencing_token = static_cast<std::uint64_t>(ns.czxid);
    res.granted_ttl = std::max(milliseconds(1), std::min(c.req.ttl, ms_until(deadline(), c.sent)));
    res.lease_ref = ns.node;
    res.session = static_cast<std::uint64_t>(c.sid);
    queue.drop(c.key.first, c.key.second);
    acquired(c.req, std::move(*hp), error_code(), res);
}

// Not first: a queued acquire keeps its node and waits; a try withdraws it.
void zookeeper_store::impl::not_first(const round_ctx& c, std::size_t contenders, const acquire_ptr& hp)
{
    if (contenders > 1)
        contended[c.req.name] = true;
    if (c.req.queue) {
        start_queued(c.req.name, c.req.token, c.path, c.req.ttl, c.req.kind == lease_kind::permit);
        return acquired(c.req, std::move(*hp), error_code(), {});
    }
    withdraw(c, hp, error_code());
}

// A try must leave nothing behind. Until the delete is answered the node stays ours: an
// error here is followed by a release, which must find it (forgotten, it stayed in front
// of every contender while the session lived). `ec`: what the attempt ends with after.
void zookeeper_store::impl::withdraw(const round_ctx& c, const acquire_ptr& hp, error_code ec)
{
    auto it = nodes.find(c.key);
    if (it == nodes.end() || it->second.node.empty() || !zk) {
        nodes.erase(c.key);
        return acquired(c.req, std::move(*hp), ec, {});
    }
    zk->remove(it->second.node, [self = shared_from_this(), c, hp, ec](int rc) {
        if (rc != ZOK && rc != ZNONODE)
            return self->acquired(c.req, std::move(*hp), self->to_error(rc, "withdrawing"), {});
        self->nodes.erase(c.key);
        self->acquired(c.req, std::move(*hp), ec, {});
    });
}

}  // namespace dlock
