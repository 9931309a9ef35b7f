// SPDX-License-Identifier: BSL-1.0
#include "zk_recipe.hpp"

#include <dlock/error.hpp>

#include "zookeeper/recipe.hpp"

namespace dlock::sim {

using boost::system::error_code;
using detail::wait_action;
using zookeeper::acquire_next;
using zookeeper::acquire_round;
using zookeeper::reply;
namespace zrecipe = zookeeper::recipe;

namespace {

milliseconds ms_until(detail::time_point end, detail::time_point from)
{
    return std::chrono::duration_cast<milliseconds>(end - from);
}

}  // namespace

void zk_recipe::zk_request(std::function<std::function<void()>()> apply, reply_fn failed)
{
    auto sid = sid_;
    auto sent = p_.local_now();
    p_.request(
        [this, sid, sent, apply, failed]() -> std::function<void()> {
            if (sid && !srv_.heard(sid))  // the servers expired the session: they say so
                return [this, sid, failed] {
                    if (sid_ == sid)
                        session_gone();
                    failed(error::session_lost);
                };
            auto then = apply();
            return [this, sid, sent, then] {
                if (sid && sid_ == sid)
                    life_.heard(from_reply_ ? p_.local_now() : sent);  // any answer dates the session
                then();
            };
        },
        failed);
}

// ---- the session (src/zookeeper/session.cpp) ----

void zk_recipe::ensure_session(reply_fn cont)
{
    if (sid_)
        return cont({});
    wait_session(std::move(cont), [this] { open(); });
}

void zk_recipe::open()
{
    auto timeout = p_.shared().cfg.lease;
    auto sent = p_.local_now();
    auto done = [this](error_code ec) { opened(ec); };
    p_.request(
        [this, timeout, sent, done]() -> std::function<void()> {
            auto id = srv_.open_session(timeout);
            return [this, id, timeout, sent, done] {
                sid_ = id;
                auto every = std::max(milliseconds(20), timeout / 3);
                auto up = life_.opened(static_cast<std::uint64_t>(id), sent, timeout, {every, every});
                arm_ping();
                arm_deadline();
                tell(up);
                done({});
            };
        },
        done);
}

void zk_recipe::arm_ping()
{
    auto gen = ++ping_gen_;
    p_.at_local(life_.next_keepalive(), [this, gen, sid = sid_] {
        if (gen != ping_gen_ || sid_ != sid)
            return;
        auto sent = p_.local_now();
        life_.keepalive_sent(sent);
        zk_request(
            [this, sid, sent]() -> std::function<void()> {
                return [this, sid, sent] {
                    if (sid_ != sid)
                        return;
                    auto ev = life_.confirmed(from_reply_ ? p_.local_now() : sent);
                    arm_deadline();
                    arm_ping();
                    if (ev)
                        tell(*ev);
                };
            },
            [this, sid](error_code) {
                if (sid_ != sid)
                    return;
                auto ev = life_.unconfirmed(p_.local_now());
                arm_ping();
                if (ev)
                    tell(*ev);
            });
    });
}

void zk_recipe::arm_deadline()
{
    auto gen = ++deadline_gen_;
    p_.at_local(life_.deadline(), [this, gen, sid = sid_] {
        if (gen == deadline_gen_ && sid_ == sid && life_.expired(p_.local_now()))
            session_gone();
    });
}

// The connection is back: the client re-attaches its session, which the servers confirm
// (or say it expired).
void zk_recipe::connected()
{
    if (!sid_)
        return;
    auto sid = sid_;
    zk_request(
        [this, sid]() -> std::function<void()> {
            return [this, sid] {
                if (sid_ != sid)
                    return;
                if (auto ev = life_.reconnected())
                    tell(*ev);
            };
        },
        [](error_code) {});
}

void zk_recipe::session_gone()
{
    if (!sid_)
        return;
    auto old = life_.end();
    auto sid = std::exchange(sid_, 0);
    nodes_.clear();
    ++ping_gen_;
    ++deadline_gen_;
    // The client closes it: its nodes go now if the servers hear it, else at their expiry.
    p_.request(
        [this, sid]() -> std::function<void()> {
            srv_.close_session(sid);
            return [] {};
        },
        [](error_code) {});
    session_recipe::tell(session_event::lost, old);
    waits_.end_all(true);
}

// ---- acquires (src/zookeeper/acquire.cpp) ----

void zk_recipe::attempt(const detail::fsm_action& a)
{
    begin(a.token);
    ensure_session([this, a](error_code ec) {
        if (ec)
            return acquired(a.token, ec, {});
        round(a, false);
    });
}

// A create whose reply was lost may have made a node: found by its guid.
void zk_recipe::find_lost(const std::string& token, std::function<void()> then, reply_fn failed)
{
    auto sid = sid_;
    zk_request(
        [this, token, sid, then]() -> std::function<void()> {
            auto children = srv_.children();
            return [this, token, sid, then, children] {
                auto pos = zrecipe::find(zrecipe::contenders(children), token, sid);
                if (pos.found)
                    nodes_[token] = node_state{pos.node, 0, false, false};
                else
                    nodes_.erase(token);
                then();
            };
        },
        failed);  // still uncertain: the attempt (or release) fails and is asked again
}

void zk_recipe::round(const detail::fsm_action& a, bool retried)
{
    const auto& token = a.token;
    if (!sid_) {  // the session went between two steps of this acquire
        if (!retried)
            return ensure_session([this, a](error_code ec) {
                if (ec)
                    return acquired(a.token, ec, {});
                round(a, true);
            });
        return acquired(token, error::connection_lost, {});
    }
    if (nodes_[token].uncertain)
        return find_lost(
            token, [this, a, retried] { round(a, retried); },
            [this, token](error_code ec) { acquired(token, ec, {}); });
    auto sid = sid_;
    auto sent = p_.local_now();
    bool create = nodes_[token].node.empty();
    auto prefix = zrecipe::node_prefix(token, sid);
    // The create and the children read go back to back: one round trip, both lost together.
    auto judge_it = [this, a, retried, sid, sent, create](bool answered,
                                                          std::optional<std::pair<std::string, std::int64_t>> made,
                                                          std::vector<std::string> children) {
        acquire_round r;
        r.same_session = sid_ == sid;
        r.retried = retried;
        r.parents_made = true;  // the model's lock path exists
        r.queue = a.queue;
        r.create = !create ? reply::not_sent : !answered ? reply::lost : made ? reply::ok : reply::failed;
        r.children = answered ? reply::ok : reply::lost;
        if (r.same_session && made)
            nodes_[a.token] = node_state{made->first, made->second, false, false};
        std::vector<std::string> sorted;
        if (answered) {
            sorted = zrecipe::contenders(std::move(children));
            r.pos = zrecipe::find(sorted, a.token, sid);
        }
        auto known = nodes_.find(a.token);
        r.czxid_known = known != nodes_.end() && !known->second.node.empty() && known->second.czxid != 0;
        switch (zookeeper::judge(r)) {
        case acquire_next::fail_closed:
        case acquire_next::make_parents:
        case acquire_next::mismatch: return acquired(a.token, error::protocol_error, {});  // not in this model
        case acquire_next::start_over: return round(a, true);
        case acquire_next::fail_session_lost: return acquired(a.token, error::connection_lost, {});
        case acquire_next::fail_create_uncertain:
            nodes_[a.token].uncertain = true;  // it may exist: the guid finds it next time
            return acquired(a.token, error::connection_lost, {});
        case acquire_next::fail_create: return acquired(a.token, error::session_lost, {});
        case acquire_next::fail_children: return acquired(a.token, error::connection_lost, {});
        case acquire_next::gone: nodes_.erase(a.token); return acquired(a.token, {}, {});
        case acquire_next::check_owner: {
            auto node = r.pos.node;
            nodes_[a.token].node = node;
            return zk_request(
                [this, a, node, sid, retried]() -> std::function<void()> {
                    auto n = srv_.get(node);
                    return [this, a, n, sid, retried] {
                        if (n && n->owner == sid && sid_ == sid)
                            nodes_[a.token].czxid = n->czxid;
                        else
                            nodes_.erase(a.token);
                        round(a, retried);
                    };
                },
                [this, a](error_code ec) { acquired(a.token, ec, {}); });
        }
        case acquire_next::held: {
            auto& ns = nodes_[a.token];
            ns.held = true;
            acquire_result res;
            res.acquired = true;
            res.fencing_token = static_cast<std::uint64_t>(ns.czxid);
            res.granted_ttl =
                std::max(milliseconds(1), std::min(p_.shared().cfg.lease, ms_until(life_.deadline(), sent)));
            res.lease_ref = ns.node;
            res.session = static_cast<std::uint64_t>(sid);
            waits_.drop(name_, a.token);
            return acquired(a.token, {}, res);
        }
        case acquire_next::queued:
        case acquire_next::withdraw:
            if (sorted.size() > 1)
                contended_ = true;
            if (a.queue) {
                if (!waits_.find(name_, a.token)) {
                    auto q = std::make_shared<queued>();
                    q->name = name_;
                    q->token = a.token;
                    q->ttl = p_.shared().cfg.lease;
                    q->session = sid_;
                    waits_.start(q);
                }
                return acquired(a.token, {}, {});
            }
            // A try leaves nothing behind; until the delete is answered the node stays ours.
            return zk_request(
                [this, a]() -> std::function<void()> {
                    srv_.remove(nodes_[a.token].node);
                    return [this, a] {
                        nodes_.erase(a.token);
                        acquired(a.token, {}, {});
                    };
                },
                [this, a](error_code ec) { acquired(a.token, ec, {}); });
        }
    };
    zk_request(
        [this, create, prefix, token, sid, judge_it]() -> std::function<void()> {
            std::optional<std::pair<std::string, std::int64_t>> made;
            if (create)
                made = srv_.create(prefix, token, sid);
            if (made && p_.w().verbose)
                p_.w().log(p_.name() + " created " + made->first + " for " + token);
            auto children = srv_.children();
            return [judge_it, made, children] { judge_it(true, made, children); };
        },
        [judge_it](error_code) { judge_it(false, std::nullopt, {}); });
}

// ---- renewals and releases (src/zookeeper/store.cpp, release.cpp) ----

void zk_recipe::renew(const detail::fsm_action& a)
{
    auto it = nodes_.find(a.token);
    auto node = !a.ref.empty() ? a.ref : it != nodes_.end() ? it->second.node : std::string();
    auto done = [this](error_code ec, renew_result r) {
        p_.fsm().on_renew_done(ec, r, p_.local_now());
        p_.step();
    };
    if (node.empty() || !sid_)
        return p_.later(real_time(0), [done] { done({}, {}); });
    auto sid = sid_;
    zk_request(
        [this, node, sid, done]() -> std::function<void()> {
            auto n = srv_.get(node);
            auto children = srv_.children();
            return [this, n, node, sid, children, done] {
                renew_result res{n && n->owner == sid && sid_ == sid, false};
                res.contended = zrecipe::waited_for(zrecipe::contenders(children), node);
                if (std::exchange(contended_, false))
                    res.contended = true;
                res.contended = res.contended && res.owned;
                done({}, res);
            };
        },
        [done](error_code ec) { done(ec, {}); });
}

void zk_recipe::send_release(const detail::fsm_action& a, bool again)
{
    auto done = [this, id = a.id](error_code ec, bool was) { released(id, ec, was); };
    // The connection went under it while the session lives: asked again (release_later).
    auto sid = sid_;
    auto later = [this, a, sid, done](error_code ec) {
        if (ec != error::session_lost && sid && sid_ == sid)
            return p_.later(std::max(milliseconds(10), p_.shared().cfg.lease / 20),
                            [this, a] { send_release(a, true); });
        done(ec, false);
    };
    auto it = nodes_.find(a.token);
    auto node = it != nodes_.end() ? it->second.node : std::string();
    if (node.empty() && it != nodes_.end() && it->second.uncertain && sid_)
        return find_lost(
            a.token, [this, a, again] { send_release(a, again); }, later);
    if (node.empty() || !sid_) {
        nodes_.erase(a.token);
        return done({}, false);
    }
    bool held = it->second.held;
    zk_request(
        [this, a, node, held, again, done]() -> std::function<void()> {
            bool removed = srv_.remove(node);
            return [this, a, held, again, removed, done] {
                nodes_.erase(a.token);
                // Gone when asked again: most likely the first delete, whose reply was lost, did it.
                done({}, (removed || again) && held);
            };
        },
        later);
}

// ---- watches and queued waits (src/zookeeper/queue.cpp) ----

void zk_recipe::perform(const queued_ptr& q, const wait_action& a)
{
    using type = wait_action::type;
    switch (a.t) {
    case type::check: return read_place(q);
    case type::watch: {
        watched_[a.key] = q;
        auto conn = p_.conn();
        auto key = a.key;
        // The read and the watch are one request: nothing can go unseen between them.
        return zk_request(
            [this, conn, key, q]() -> std::function<void()> {
                bool exists = srv_.watch(conn, key);
                return [this, key, q, exists] {
                    if (!exists)
                        waits_.feed(q, [&](detail::predecessor_wait& w) { w.on_predecessor_gone(key); });
                };
            },
            [this, key, q](error_code) {
                waits_.feed(q, [&](detail::predecessor_wait& w) { w.on_watch_failed(key); });
            });
    }
    case type::grant: {
        auto& ns = nodes_[q->token];
        ns.held = true;
        if (!ns.czxid)  // our node's czxid unknown: ask again
            return tell_watch(q->token, watch_event::resync);
        grant_notice g{static_cast<std::uint64_t>(ns.czxid),
                       std::min(q->ttl, ms_until(life_.deadline(), p_.local_now())), ns.node,
                       static_cast<std::uint64_t>(q->session)};
        return tell_watch(q->token, watch_event::granted, g);
    }
    case type::resync: return tell_watch(q->token, watch_event::resync);
    case type::cancel_watch:  // one-shot: it fires once more, into a key no longer watched
    case type::set_timer:     // never asked: without retries a failure ends the wait
    case type::cancel_timer: return;
    }
}

void zk_recipe::read_place(const queued_ptr& q)
{
    if (!watching(q->token))
        return waits_.feed(q, [](detail::predecessor_wait& w) { w.on_abandon(); });
    if (!sid_ || sid_ != q->session)
        return waits_.feed(q, [](detail::predecessor_wait& w) { w.on_lost(); });
    zk_request(
        [this, q]() -> std::function<void()> {
            auto children = srv_.children();
            return [this, q, children] {
                if (sid_ != q->session)
                    return waits_.feed(q, [](detail::predecessor_wait& w) { w.on_lost(); });
                auto pos = zrecipe::find(zrecipe::contenders(children), q->token, q->session);
                waits_.feed(q, [&](detail::predecessor_wait& w) {
                    if (!pos.found)
                        w.on_gone();
                    else if (pos.first)
                        w.on_first();
                    else
                        w.on_behind(pos.predecessor, 0);
                });
            };
        },
        [this, q](error_code) { waits_.feed(q, [](detail::predecessor_wait& w) { w.on_check_failed(); }); });
}

void zk_recipe::deleted(const std::string& name)
{
    auto it = watched_.find(name);
    if (it == watched_.end())
        return;
    auto q = it->second;
    watched_.erase(it);
    waits_.feed(q, [&](detail::predecessor_wait& w) { w.on_predecessor_gone(name); });
}

}  // namespace dlock::sim
