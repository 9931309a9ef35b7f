// SPDX-License-Identifier: BSL-1.0
#include "redlock_recipe.hpp"

#include <dlock/error.hpp>

#include "redis/redlock_tally.hpp"

#include <algorithm>

namespace dlock::sim {

using boost::system::error_code;
using redis::tally;
using redis::vote;

// acquire_op's state in src/redis/redlock_store.cpp.
struct redlock_recipe::acquire_op {
    std::string token;
    milliseconds ttl{0};
    detail::time_point sent;
    std::size_t replies = 0, granted = 0, agree = 0;
    std::vector<long long> refused_ttls;
    std::uint64_t fence = 0;
    bool decided = false, in_step = false, raising = false;
    std::size_t raise_replies = 0, confirmed = 0, not_held = 0;
};

template <class R, class F, class Done>
void redlock_recipe::to_node(std::size_t i, F f, Done done)
{
    p_.request(
        [&n = n_, &w = p_.w(), i, f, done]() -> std::function<void()> {
            if (w.now() < n.down_until[i])
                return [done] { done(error::connection_lost, R{}); };
            R r = f(n.nodes[i], w.now());
            return [done, r] { done(error_code(), r); };
        },
        [done](error_code ec) { done(ec, R{}); });
}

void redlock_recipe::attempt(const detail::fsm_action& a)
{
    auto s = std::make_shared<acquire_op>();
    s->token = a.token;
    s->ttl = p_.shared().cfg.lease;
    s->sent = p_.local_now();
    for (std::size_t i = 0; i < size(); ++i)
        to_node<acquire_result>(
            i,
            [token = s->token, ttl = s->ttl](redis_model& m, real_time now) {
                return m.acquire(token, ttl, false, now);
            },
            [this, s, i](error_code ec, acquire_result r) { on_grant(s, i, ec, r); });
}

void redlock_recipe::on_grant(const std::shared_ptr<acquire_op>& s, std::size_t i, error_code ec,
                              const acquire_result& r)
{
    ++s->replies;
    if (s->decided || s->raising) {
        // A late grant: the release or the counter update sent since covers it, except after
        // a grant without update, where a lagging node is brought up to the token.
        if (s->in_step && !ec && r.acquired && r.fencing_token < s->fence)
            send_raise(s, i, false);
        return;
    }
    if (!ec && r.acquired) {
        ++s->granted;
        if (r.fencing_token > s->fence) {
            s->fence = r.fencing_token;
            s->agree = 0;
        }
        s->agree += r.fencing_token == s->fence;
    } else if (!ec) {
        s->refused_ttls.push_back(r.holder_ttl.count());
    }
    switch (tally(size(), s->granted, s->refused_ttls.size(), size() - s->replies)) {
    case vote::pending: return;
    case vote::yes:
        if (s->agree >= quorum()) {  // a quorum holds with counters already at the token
            s->in_step = true;
            return succeed(s);
        }
        s->raising = true;
        for (std::size_t k = 0; k < size(); ++k)
            send_raise(s, k, true);
        return;
    case vote::no: {
        // The k-th shortest refusing TTL: when enough refusing nodes are free for a quorum.
        auto v = s->refused_ttls;
        std::size_t others = size() - v.size(), k = quorum() > others ? quorum() - others : 1;
        std::sort(v.begin(), v.end());
        return fail(s, {}, k <= v.size() && v[k - 1] >= 0 ? milliseconds(v[k - 1]) : milliseconds(-1));
    }
    case vote::no_quorum: return fail(s, error::no_quorum, milliseconds(-1));
    }
}

void redlock_recipe::send_raise(const std::shared_ptr<acquire_op>& s, std::size_t i, bool counted)
{
    to_node<bool>(
        i,
        [fence = s->fence, token = s->token](redis_model& m, real_time now) {
            return m.raise_fence(fence, token, now);
        },
        [this, s, counted](error_code ec, bool held) {
            if (!counted)
                return;
            ++s->raise_replies;
            if (s->decided)
                return;
            if (!ec)
                ++(held ? s->confirmed : s->not_held);
            switch (tally(size(), s->confirmed, s->not_held, size() - s->raise_replies)) {
            case vote::pending: return;
            case vote::yes: return succeed(s);
            case vote::no: return fail(s, {}, milliseconds(-1));  // the lease ended on too many nodes
            case vote::no_quorum: return fail(s, error::no_quorum, milliseconds(-1));
            }
        });
}

void redlock_recipe::succeed(const std::shared_ptr<acquire_op>& s)
{
    const auto drift =
        milliseconds(static_cast<long long>(static_cast<double>(s->ttl.count()) * 0.01)) + milliseconds(2);
    if (!(p_.local_now() - s->sent < s->ttl - drift))  // took too long: what is left is no lock
        return fail(s, {}, milliseconds(-1));
    s->decided = true;
    acquire_result r;
    r.acquired = true;
    r.fencing_token = s->fence;
    r.granted_ttl = s->ttl;
    p_.fsm().on_attempt_done({}, r, p_.local_now());
    p_.step();
}

void redlock_recipe::fail(const std::shared_ptr<acquire_op>& s, error_code ec, milliseconds hint)
{
    s->decided = true;
    release_everywhere(s->token);
    acquire_result r;
    r.holder_ttl = hint;
    p_.fsm().on_attempt_done(ec, r, p_.local_now());
    p_.step();
}

// Best effort: each node's connection runs requests in order, so this follows any acquire
// still in flight there.
void redlock_recipe::release_everywhere(const std::string& token)
{
    for (std::size_t i = 0; i < size(); ++i)
        to_node<bool>(
            i, [token](redis_model& m, real_time now) { return m.release(token, now); }, [](error_code, bool) {});
}

void redlock_recipe::renew(const detail::fsm_action& a)
{
    struct votes {
        std::size_t replies = 0, owned = 0, not_owned = 0;
        bool contended = false, decided = false;
    };
    auto v = std::make_shared<votes>();
    auto ttl = p_.shared().cfg.lease;
    for (std::size_t i = 0; i < size(); ++i)
        to_node<renew_result>(
            i, [token = a.token, ttl](redis_model& m, real_time now) { return m.renew(token, ttl, now); },
            [this, v](error_code ec, renew_result r) {
                ++v->replies;
                if (v->decided)
                    return;
                if (!ec) {
                    ++(r.owned ? v->owned : v->not_owned);
                    v->contended = v->contended || r.contended;
                }
                auto outcome = tally(size(), v->owned, v->not_owned, size() - v->replies);
                if (outcome == vote::pending)
                    return;
                v->decided = true;
                error_code e = outcome == vote::no_quorum ? error_code(error::no_quorum) : error_code();
                p_.fsm().on_renew_done(e, renew_result{outcome == vote::yes, v->contended}, p_.local_now());
                p_.step();
            });
}

void redlock_recipe::release(const detail::fsm_action& a)
{
    struct votes {
        std::size_t replies = 0, released = 0, not_released = 0;
        bool decided = false;
    };
    auto v = std::make_shared<votes>();
    auto id = a.id;
    for (std::size_t i = 0; i < size(); ++i)
        to_node<bool>(
            i, [token = a.token](redis_model& m, real_time now) { return m.release(token, now); },
            [this, v, id](error_code ec, bool ok) {
                ++v->replies;
                if (v->decided)
                    return;
                if (!ec)
                    ++(ok ? v->released : v->not_released);
                auto outcome = tally(size(), v->released, v->not_released, size() - v->replies);
                if (outcome == vote::pending)
                    return;
                v->decided = true;
                error_code e = outcome == vote::no_quorum ? error_code(error::no_quorum) : error_code();
                p_.fsm().on_release_done(id, e, outcome == vote::yes, p_.local_now());
                p_.step();
            });
}

// ---- the watch: every node's release channel, ready once a quorum listens ----

void redlock_recipe::watch(const detail::fsm_action&)
{
    watching_ = true;
    ready_sent_ = false;
    std::fill(confirmed_.begin(), confirmed_.end(), 0);
    confirmed_count_ = 0;
    if (p_.up())
        for (std::size_t i = 0; i < size(); ++i)
            subscribe(i);
}

void redlock_recipe::unwatch()
{
    watching_ = false;
    unsubscribe(p_.conn());  // UNSUBSCRIBE, answered before any later publish
}

void redlock_recipe::unsubscribe(int conn)
{
    for (auto& m : n_.nodes)
        m.unsubscribe_all(conn);
}

void redlock_recipe::connected()
{
    if (watching_)
        for (std::size_t i = 0; i < size(); ++i)
            subscribe(i);
}

void redlock_recipe::node_back(std::size_t i)
{
    if (watching_ && p_.up())
        subscribe(i);
}

void redlock_recipe::subscribe(std::size_t i)
{
    auto conn = p_.conn();
    p_.request(
        [this, &n = n_, &w = p_.w(), i, conn]() -> std::function<void()> {
            if (w.now() < n.down_until[i])
                return [] {};  // refused: the node's return subscribes again (node_back)
            if (watching_)
                n.nodes[i].subscribers().insert(conn);
            return [this, i] {
                if (!watching_)
                    return;
                // A node's first confirmation counts toward the quorum; later ones are resyncs.
                if (!confirmed_[i]) {
                    confirmed_[i] = 1;
                    ++confirmed_count_;
                    if (ready_sent_)
                        return;
                    if (confirmed_count_ >= quorum()) {
                        ready_sent_ = true;
                        p_.fsm().on_watch(watch_event::ready, {}, p_.local_now());
                        p_.step();
                    }
                    return;
                }
                if (ready_sent_) {
                    p_.fsm().on_watch(watch_event::resync, {}, p_.local_now());
                    p_.step();
                }
            };
        },
        [](error_code) {});  // a lost subscription comes back with the connection
}

void redlock_recipe::released(std::size_t)
{
    if (!watching_)
        return;
    p_.fsm().on_watch(watch_event::released, {}, p_.local_now());
    p_.step();
}

}  // namespace dlock::sim
