// SPDX-License-Identifier: BSL-1.0
// A semaphore in Curator's InterProcessSemaphoreV2 layout (semaphore_layout.hpp): once an
// acquire round has made our node first under `locks`, a lease node under `leases` and the
// count behind it (judged by permit_round.hpp's judge()); a permit lets go of `locks`, a
// queued acquirer without one keeps it and waits for a lease to go; a release deletes the
// lease node. Status and force release of a semaphore's name live here too.
#include "core/kind_text.hpp"
#include "zookeeper/latch_node.hpp"
#include "zookeeper/permit_round.hpp"
#include "zookeeper/store_impl.hpp"

#include <zookeeper/zookeeper.h>

#include <algorithm>

namespace dlock {

namespace asio = boost::asio;
using boost::system::error_code;
using dlock::detail::ms_until;
using dlock::detail::post_completion;
using dlock::detail::post_moved;
using std::chrono::milliseconds;
using zookeeper::permit_next;
using zookeeper::permit_round;
using zookeeper::reply;
using zookeeper::detail::node_stat;
using zookeeper::detail::reply_of;
namespace layout = zookeeper::semaphore_layout;
namespace recipe = zookeeper::recipe;

namespace {

std::string leases_of(const std::string& base)
{
    return base + "/" + std::string(layout::leases);
}

}  // namespace

// Our lease node (made now, or known) and, behind it in the same round trip, the children
// of `leases` (watched while a queued acquirer may have to wait) and of the name's path.
void zookeeper_store::impl::take_permit(const round_ctx& c, const acquire_ptr& hp, bool parents_made)
{
    if (!zk || session_id != c.sid) {
        permit_replies none{.create_rc = 0, .leases_rc = 0, .path_rc = 0};
        return judge_permit(c, hp, none);
    }
    auto& ls = leases[c.key];
    if (ls.uncertain)
        return find_lost_lease(c, hp);
    auto base = path_of(c.req.name);
    auto st = std::make_shared<permit_replies>();
    st->parents_made = parents_made;
    auto evaluate = [self = shared_from_this(), c, hp, st] {
        if (st->create_rc == 1 || st->leases_rc == 1 || st->path_rc == 1)
            return;  // a reply is still due
        self->judge_permit(c, hp, *st);
    };
    if (!ls.node.empty()) {
        st->create_rc = 0;
    } else {
        st->create_sent = true;
        zk->create(leases_of(base) + "/" + layout::lease_prefix(c.req.token, c.sid, c.req.capacity), c.req.token,
                   ZOO_EPHEMERAL_SEQUENTIAL, [st, evaluate](int rc, std::string node, node_stat s) {
                       st->create_rc = rc;
                       st->node = std::move(node);
                       st->stat = s;
                       evaluate();
                   });
    }
    zookeeper::detail::client::watch_fn wake;
    if (c.req.queue) {  // armed before the count is read: a lease that goes after it is seen
        auto epoch = permit_waits[c.key] = ++permit_epochs;
        wake = [w = weak_from_this(), key = c.key, epoch](int) {
            if (auto s = w.lock())
                s->permit_freed(key, epoch);
        };
    }
    zk->get_children(
        leases_of(base),
        [st, evaluate](int rc, std::vector<std::string> children) {
            st->leases_rc = rc == ZNONODE && st->create_rc == ZNONODE ? ZOK : rc;
            st->leases = std::move(children);
            evaluate();
        },
        std::move(wake));
    zk->get_children(base, [st, evaluate](int rc, std::vector<std::string> children) {
        st->path_rc = rc;
        st->children = std::move(children);
        evaluate();
    });
}

// A lease create whose reply was lost: found by its guid (on a server synced with the
// leader) before creating again.
void zookeeper_store::impl::find_lost_lease(const round_ctx& c, const acquire_ptr& hp)
{
    auto path = leases_of(path_of(c.req.name));
    zk->sync(path, [](int) {});
    zk->get_children(path, [self = shared_from_this(), c, hp, path](int rc, std::vector<std::string> children) {
        if (rc != ZOK && rc != ZNONODE)
            return self->acquired(c.req, std::move(*hp), self->to_error(rc, "children of " + path), {});
        auto found = layout::count_leases(children, c.req.token, c.sid, c.req.capacity);
        auto& ls = self->leases[c.key];
        ls = {};
        if (found.found)
            ls.node = path + "/" + found.node;
        else
            self->leases.erase(c.key);
        self->take_permit(c, hp);
    });
}

// The round's replies as judge() reads them; a lease this round made is ours from now.
// `others`: the contenders of other kinds under the name.
permit_round zookeeper_store::impl::permit_round_of(const round_ctx& c, permit_replies& st,
                                                    std::vector<std::string>& others)
{
    permit_round r{.closed = closed,
                   .same_session = session_id == c.sid && zk,
                   .retried = c.retried,
                   .parents_made = st.parents_made,
                   .queue = c.req.queue,
                   .permits = c.req.capacity,
                   .create = st.create_sent ? reply_of(st.create_rc) : reply::not_sent,
                   // A known lease whose `leases` was reaped (a forced release): gone, below.
                   .leases = reply_of(st.leases_rc == ZNONODE && !st.create_sent ? ZOK : st.leases_rc),
                   .path = reply_of(st.path_rc)};
    if (!closed && r.same_session && r.create == reply::ok && !st.node.empty())
        leases[c.key] = node_state{.node = st.node, .czxid = st.stat.czxid};
    if (r.leases == reply::ok)
        r.count = layout::count_leases(st.leases, c.req.token, c.sid, c.req.capacity);
    bool latch = st.latch_checked ? st.latch_alive : zookeeper::latch_node::in(st.children);
    others = recipe::contenders(std::move(st.children));
    r.foreign = !others.empty() || latch;
    auto known = leases.find(c.key);
    r.czxid_known = known != leases.end() && !known->second.node.empty() && known->second.czxid != 0;
    if (known != leases.end() && known->second.kind_checked) {
        r.foreign = false;  // looked for once our lease existed: a later comer sees ours instead
        r.count.other_permits.reset();
    }
    return r;
}

// A latch's node under the name keeps the semaphore out unless it expired (then deleted).
void zookeeper_store::impl::check_permit_latch(const round_ctx& c, const acquire_ptr& hp,
                                               std::shared_ptr<permit_replies> st)
{
    auto now = st->create_sent && st->create_rc == ZOK ? st->stat.mtime : 0;
    latch_in_use(c.req.name, now, [self = shared_from_this(), c, hp, st](bool in_use) {
        st->latch_checked = true;
        st->latch_alive = in_use;
        self->judge_permit(c, hp, *st);
    });
}

void zookeeper_store::impl::judge_permit(const round_ctx& c, const acquire_ptr& hp, permit_replies& st)
{
    if (!st.latch_checked && st.path_rc == ZOK && zookeeper::latch_node::in(st.children))
        return check_permit_latch(c, hp, std::make_shared<permit_replies>(std::move(st)));
    std::vector<std::string> others;
    auto r = permit_round_of(c, st, others);
    auto known = leases.find(c.key);
    const auto& req = c.req;
    auto next = judge(r);
    if (next != permit_next::wait)
        permit_waits.erase(c.key);
    if ((next == permit_next::granted || next == permit_next::wait || next == permit_next::withdraw) &&
        known != leases.end())
        known->second.kind_checked = true;
    switch (next) {
    case permit_next::fail_closed: return acquired(req, std::move(*hp), error::closed, {});
    case permit_next::start_over: return acquire(req, std::move(*hp), true);
    case permit_next::fail_session_lost: return acquired(req, std::move(*hp), error::connection_lost, {});
    case permit_next::make_parents:
        return make_parents(
            leases_of(path_of(req.name)),
            [self = shared_from_this(), c, hp](int rc) {
                if (rc != ZOK && rc != ZNODEEXISTS)  // our `locks` node must not stay in front of everyone
                    return self->drop_permit(c, hp, self->to_error(rc, "creating the leases path"));
                self->take_permit(c, hp, true);
            },
            2);
    // Failures leave no `locks` node of ours in front of everyone (a permanent error is not
    // followed by a release); a lease whose create may have run stays for the release.
    case permit_next::fail_create_uncertain:
        leases[c.key].uncertain = true;  // it may exist: the guid finds it next time
        return withdraw(c, hp, to_error(st.create_rc, "create a lease"));
    case permit_next::fail_create: return drop_permit(c, hp, to_error(st.create_rc, "create a lease"));
    case permit_next::fail_children:
        return drop_permit(c, hp, to_error(st.leases_rc != ZOK ? st.leases_rc : st.path_rc, "children of a semaphore"));
    case permit_next::mismatch:
        set_text(!r.foreign       ? dlock::detail::kind_in_use_text(lease_kind::permit, *r.count.other_permits)
                 : others.empty() ? std::string(zookeeper::latch_node::in_use_text)
                                  : dlock::detail::kind_in_use_text(zookeeper::detail::lease_kind_of(
                                        recipe::parse_contender(others.front())->kind)));
        return drop_permit(c, hp, error::kind_mismatch);
    case permit_next::gone:  // deleted under us (a forced release): start again from `locks`
        leases.erase(c.key);
        watches.tell(req.name, req.token, watch_event::resync);
        return drop_permit(c, hp, error_code());
    case permit_next::check_owner: return check_lease_owner(c, hp);
    case permit_next::granted: return grant_permit(c, hp);
    case permit_next::wait:
        contended[req.name] = true;
        return acquired(req, std::move(*hp), error_code(), {});  // woken by permit_freed
    case permit_next::withdraw:
        contended[req.name] = true;  // every permit taken: a holder of this store hears it
        return drop_permit(c, hp, error_code());
    }
}

// Found by its guid after a lost reply: kept only if this session owns it.
void zookeeper_store::impl::check_lease_owner(const round_ctx& c, const acquire_ptr& hp)
{
    zk->exists(leases[c.key].node, [self = shared_from_this(), c, hp](int rc, node_stat s) {
        if (rc == ZOK && s.ephemeral_owner == c.sid && self->session_id == c.sid)
            self->leases[c.key].czxid = s.czxid;
        else if (rc == ZOK || rc == ZNONODE)
            self->leases.erase(c.key);
        else
            return self->acquired(c.req, std::move(*hp), self->to_error(rc, "checking our lease"), {});
        self->take_permit(c, hp);
    });
}

// A permit: `locks` goes to the next acquirer at once (its delete needs no answer before the
// grant; it is asked again while the connection is lost), and the lease holds.
void zookeeper_store::impl::grant_permit(const round_ctx& c, const acquire_ptr& hp)
{
    auto& ls = leases[c.key];
    ls.held = true;
    if (auto it = nodes.find(c.key); it != nodes.end()) {
        remove_until_gone(it->second.node, c.sid);
        nodes.erase(it);
    }
    acquire_result res;
    res.acquired = true;
    res.fencing_token = static_cast<std::uint64_t>(ls.czxid);
    res.granted_ttl = std::max(milliseconds(1), std::min(c.req.ttl, ms_until(deadline(), c.sent)));
    res.lease_ref = ls.node;
    res.session = static_cast<std::uint64_t>(c.sid);
    queue.drop(c.key.first, c.key.second);
    acquired(c.req, std::move(*hp), error_code(), res);
}

// No permit for this attempt: its lease node, then its `locks` node, go; `ec` after that.
void zookeeper_store::impl::drop_permit(const round_ctx& c, const acquire_ptr& hp, error_code ec)
{
    auto it = leases.find(c.key);
    if (it == leases.end() || it->second.node.empty() || !zk) {
        if (it != leases.end() && !it->second.uncertain)  // one that may exist stays for the release
            leases.erase(it);
        return withdraw(c, hp, ec);
    }
    zk->remove(it->second.node, [self = shared_from_this(), c, hp, ec](int rc) {
        if (rc != ZOK && rc != ZNONODE)  // both stay ours, for the release that follows the error
            return self->acquired(c.req, std::move(*hp), self->to_error(rc, "withdrawing a lease"), {});
        self->leases.erase(c.key);
        self->withdraw(c, hp, ec);
    });
}

void zookeeper_store::impl::permit_freed(const key_pair& key, std::uint64_t epoch)
{
    auto it = permit_waits.find(key);
    if (it == permit_waits.end() || it->second != epoch)
        return;
    permit_waits.erase(it);
    watches.tell(key.first, key.second, watch_event::resync);  // count again
}

void zookeeper_store::impl::remove_until_gone(const std::string& node, std::int64_t sid)
{
    if (!zk || session_id != sid || closed)
        return;  // the session's end deletes it
    zk->remove(node, [w = weak_from_this(), node, sid](int rc) {
        auto s = w.lock();
        if (!s || (rc != ZCONNECTIONLOSS && rc != ZOPERATIONTIMEOUT))
            return;
        auto t = std::make_shared<asio::steady_timer>(s->ex, std::max(milliseconds(10), s->timeout / 20));
        t->async_wait([w, t, node, sid](error_code) {
            if (auto s = w.lock())
                s->remove_until_gone(node, sid);
        });
    });
}

// A release of a semaphore's lease: its node (found by its guid if its create's reply was
// lost), then whatever it still has under `locks`.
void zookeeper_store::impl::release_lease(const lease_key& k, const release_ptr& hp, bool again)
{
    key_pair key{k.name, k.token};
    auto& ls = leases[key];
    auto sid = session_id;
    if (ls.uncertain) {
        auto path = leases_of(path_of(k.name));
        zk->sync(path, [](int) {});
        return zk->get_children(
            path, [self = shared_from_this(), k, key, path, hp, sid](int rc, std::vector<std::string> c) {
                if (self->release_later(rc, sid, k, hp))
                    return;
                if (rc != ZOK && rc != ZNONODE)
                    return post_completion(self->ex, std::move(*hp), self->to_error(rc, "children of " + path), false);
                auto found = layout::count_leases(c, k.token, sid, 0);
                self->leases[key] = {};
                if (found.found)
                    self->leases[key].node = path + "/" + found.node;
                self->release(k, std::move(*hp));
            });
    }
    auto finish = [self = shared_from_this(), k, key, sid, hp](bool was) {
        self->leases.erase(key);
        if (auto it = self->nodes.find(key); it != self->nodes.end()) {
            self->remove_until_gone(it->second.node, sid);  // still waiting in `locks`
            self->nodes.erase(it);
        }
        if (was)
            self->watches.tell_tokens(k.name, k.token, watch_event::released);
        post_completion(self->ex, std::move(*hp), error_code(), was);
    };
    if (ls.node.empty())
        return finish(false);
    zk->remove(ls.node, [self = shared_from_this(), k, held = ls.held, hp, again, sid, finish](int rc) {
        if (self->release_later(rc, sid, k, hp))
            return;
        if (rc != ZOK && rc != ZNONODE)
            return post_completion(self->ex, std::move(*hp), self->to_error(rc, "delete"), false);
        finish((rc == ZOK || (again && rc == ZNONODE)) && held);
    });
}

// ---- a semaphore's name, for operators ----

void zookeeper_store::impl::semaphore_status(const std::string& name,
                                             std::function<void(error_code, lock_status, std::string)> done)
{
    auto base = path_of(name);
    auto st = std::make_shared<std::pair<int, std::vector<std::string>>>(1, std::vector<std::string>{});
    auto waiting = std::make_shared<std::pair<int, int>>(1, 0);
    auto finish = [self = shared_from_this(), base, st, waiting, done] {
        if (st->first == 1 || waiting->first == 1)
            return;
        if (int rc = st->first != ZOK ? st->first : waiting->first; rc != ZOK)
            return done(self->to_error(rc, "children of " + base), lock_status{}, std::string());
        lock_status s;
        s.kind = lease_kind::permit;
        for (auto& l : st->second)
            if (auto n = layout::permits_of(l); n && !s.capacity)
                s.capacity = *n;
        // Curator's leases do not say how many permits there are: then all of them hold.
        s.holders = s.capacity ? std::min<std::size_t>(st->second.size(), s.capacity) : st->second.size();
        s.held = s.holders > 0;
        s.queued = static_cast<std::size_t>(waiting->second);
        s.key = leases_of(base);
        done(error_code(), std::move(s), std::string());
    };
    zk->get_children(leases_of(base), [st, finish](int rc, std::vector<std::string> c) {
        *st = {rc == ZNONODE ? ZOK : rc, std::move(c)};
        finish();
    });
    zk->exists(base + "/" + std::string(layout::locks), [waiting, finish](int rc, node_stat s) {
        *waiting = {rc == ZNONODE ? ZOK : rc, rc == ZOK ? s.num_children : 0};
        finish();
    });
}

// Every lease of the semaphore goes (their holders learn it at their next renewal).
void zookeeper_store::impl::force_release_permits(const std::string& name, const release_ptr& hp)
{
    auto path = leases_of(path_of(name));
    zk->get_children(path, [self = shared_from_this(), path, hp](int rc, std::vector<std::string> children) {
        if (rc != ZOK && rc != ZNONODE)
            return post_moved(self->ex, *hp, self->to_error(rc, "children of " + path), false);
        self->remove_nodes(path, children, hp);
    });
}

}  // namespace dlock
