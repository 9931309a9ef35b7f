// SPDX-License-Identifier: BSL-1.0
#include "etcd_recipe.hpp"

#include <dlock/error.hpp>

namespace dlock::sim {

using boost::system::error_code;
using detail::wait_action;

namespace {

milliseconds ms_until(detail::time_point end, detail::time_point from)
{
    return std::chrono::duration_cast<milliseconds>(end - from);
}

}  // namespace

// ---- the session: one lease (src/etcd/session.cpp) ----

void etcd_recipe::ensure_session(std::function<void(error_code)> cont)
{
    if (lease_)
        return cont({});
    wait_session(std::move(cont), [this] { grant(); });
}

void etcd_recipe::grant()
{
    auto ttl = p_.shared().cfg.lease;
    auto sent = p_.local_now();
    auto open = [this](error_code ec) { opened(ec); };
    p_.request(
        [this, ttl, sent, open]() -> std::function<void()> {
            auto id = srv_.grant(ttl);
            return [this, id, ttl, sent, open] {
                lease_ = id;
                auto third = ttl / 3;
                auto ev = life_.opened(static_cast<std::uint64_t>(id), sent, ttl,
                                       {third, std::min(third / 2, milliseconds(250))});
                arm_keepalive();
                arm_deadline();
                tell(ev);
                open({});
            };
        },
        open);
}

void etcd_recipe::arm_keepalive()
{
    auto gen = ++keepalive_gen_;
    p_.at_local(life_.next_keepalive(), [this, gen, l = lease_] {
        if (gen == keepalive_gen_ && lease_ == l)
            keepalive();
    });
}

void etcd_recipe::arm_deadline()
{
    auto gen = ++deadline_gen_;
    p_.at_local(life_.deadline(), [this, gen, l = lease_] {
        if (gen == deadline_gen_ && lease_ == l && life_.expired(p_.local_now()))
            session_gone();
    });
}

void etcd_recipe::keepalive()
{
    auto sent = p_.local_now();
    auto l = lease_;
    p_.request(
        [this, l, sent]() -> std::function<void()> {
            bool alive = srv_.keepalive(l);
            return [this, l, sent, alive] {
                if (lease_ != l)
                    return;
                if (!alive)
                    return session_gone();
                // Answered: the deadline moves from the send time; the next one is due.
                auto ev = life_.confirmed(from_reply_ ? p_.local_now() : sent, p_.shared().cfg.lease);
                arm_deadline();
                arm_keepalive();
                if (ev)
                    tell(*ev);
            };
        },
        [this, l](error_code) {
            if (lease_ != l)
                return;
            auto ev = life_.unconfirmed(p_.local_now());
            arm_keepalive();
            if (ev)
                tell(*ev);
        });
}

void etcd_recipe::session_gone()
{
    if (!lease_)
        return;
    auto old = life_.end();
    auto id = std::exchange(lease_, 0);
    slots_.clear();
    ++keepalive_gen_;
    ++deadline_gen_;
    p_.request(
        [this, id]() -> std::function<void()> {
            srv_.revoke(id);
            return [] {};
        },
        [](error_code) {});
    session_recipe::tell(session_event::lost, old);
    waits_.end_all(true);
}

// ---- acquires and releases (src/etcd/acquire.cpp) ----

std::string etcd_recipe::key_for(const std::string& token) const
{
    auto slot = lease_ ? slots_.find(name_, token) : std::nullopt;
    if (!slot)
        return {};
    auto k = name_ + "/" + std::to_string(lease_);
    return *slot == 0 ? k : k + "-" + std::to_string(*slot);
}

void etcd_recipe::attempt(const detail::fsm_action& a)
{
    begin(a.token);
    ensure_session([this, a](error_code ec) {
        if (ec)
            return acquired(a.token, ec, {});
        send_acquire(a, false);
    });
}

void etcd_recipe::send_acquire(const detail::fsm_action& a, bool retried)
{
    slots_.assign(name_, a.token);
    auto key = key_for(a.token);
    auto l = lease_;
    auto sent = p_.local_now();
    auto ttl = p_.shared().cfg.lease;
    p_.request(
        [this, a, key, l, sent, ttl, retried]() -> std::function<void()> {
            auto r = srv_.acquire(key, a.token, l, a.queue);
            return [this, a, key, l, sent, ttl, retried, r] {
                if (r.lease_gone) {
                    if (lease_ == l)
                        session_gone();
                    if (!retried)  // our lease vanished under us: once more, with a new one
                        return ensure_session([this, a](error_code ec) {
                            if (ec)
                                return acquired(a.token, ec, {});
                            send_acquire(a, true);
                        });
                    return acquired(a.token, error::session_lost, {});
                }
                acquire_result res;
                bool ours = r.mine && r.mine->value == a.token;
                if (ours && lease_ == l)
                    slots_.set_created(name_, a.token, r.mine->create);
                if (ours && r.owner && r.owner->key == key) {
                    res.acquired = true;
                    res.fencing_token = static_cast<std::uint64_t>(r.mine->create);
                    res.granted_ttl = std::max(milliseconds(1), std::min(ttl, ms_until(life_.raw_deadline(), sent)));
                    res.lease_ref = key;
                    res.session = static_cast<std::uint64_t>(l);
                    waits_.drop(name_, a.token);
                } else {
                    if (r.owner && r.owner->lease == l)
                        contended_ = true;
                    if (a.queue && ours && lease_ == l) {
                        if (auto q = waits_.find(name_, a.token); !q || q->mine != r.mine->create) {
                            auto nq = std::make_shared<queued>(&rng_);
                            nq->name = name_;
                            nq->token = a.token;
                            nq->key = key;
                            nq->mine = r.mine->create;
                            nq->first_send = sent;
                            nq->ttl = ttl;
                            waits_.start(nq);
                        }
                    } else if (!r.mine && lease_ == l) {
                        slots_.free(name_, a.token);
                    }
                }
                acquired(a.token, {}, res);
            };
        },
        [this, a](error_code ec) { acquired(a.token, ec, {}); });
}

void etcd_recipe::renew(const detail::fsm_action& a)
{
    auto key = a.ref.empty() ? key_for(a.token) : a.ref;
    auto done = [this](error_code ec, renew_result r) {
        p_.fsm().on_renew_done(ec, r, p_.local_now());
        p_.step();
    };
    if (key.empty())
        return p_.later(real_time(0), [done] { done({}, {}); });
    auto created = slots_.created(name_, a.token);
    auto token = a.token;
    p_.request(
        [this, key, created, token, done]() -> std::function<void()> {
            auto c = srv_.confirm(key, created, token);
            return [this, c, done] {
                renew_result res{c.owned, c.owned && c.count > 1};
                if (c.owned && std::exchange(contended_, false))
                    res.contended = true;
                done({}, res);
            };
        },
        [done](error_code ec) { done(ec, {}); });
}

// `again`: asked again after a failure (the first try may have run).
void etcd_recipe::send_release(const detail::fsm_action& a, bool again)
{
    auto done = [this, id = a.id](error_code ec, bool held) { released(id, ec, held); };
    const auto& token = a.token;
    auto key = a.ref.empty() ? key_for(token) : a.ref;
    if (key.empty())
        return done({}, false);
    auto created = slots_.created(name_, token);
    auto l = lease_;
    p_.request(
        [this, key, created, token, done, again]() -> std::function<void()> {
            auto [deleted, held] = srv_.release(key, created, token);
            // Gone when asked again: most likely the first try, whose reply was lost, did it.
            return [this, token, done, held = held || (again && !deleted)] {
                slots_.free(name_, token);  // deleted, or not ours: the token has no key now
                done({}, held);
            };
        },
        [this, a, l, done](error_code ec) {
            // Not answered: asked once more while the lease lives (its end deletes the key).
            if (l != 0 && lease_ == l && !release_once_)
                return p_.later(milliseconds(50), [this, a] { send_release(a, true); });
            done(ec, false);
        });
}

// ---- watches and queued waits (src/etcd/queue.cpp) ----

void etcd_recipe::perform(const queued_ptr& q, const wait_action& a)
{
    using type = wait_action::type;
    switch (a.t) {
    case type::check: return check_place(q);
    case type::watch: {
        watched_keys_[a.key] = q;
        auto conn = p_.conn();
        auto key = a.key;
        return p_.request(
            [this, conn, key, q]() -> std::function<void()> {
                // A watch cancelled before it was made closes its stream: none is made.
                auto it = watched_keys_.find(key);
                if (it == watched_keys_.end() || it->second != q)
                    return [] {};
                auto rev = srv_.watch(conn, key);
                return [this, key, q, rev] {
                    waits_.feed(q, [&](detail::predecessor_wait& w) { w.on_watch_ready(key, rev); });
                };
            },
            [this, key, q](error_code) {
                waits_.feed(q, [&](detail::predecessor_wait& w) { w.on_watch_failed(key); });
            });
    }
    case type::cancel_watch:
        for (auto& [k, w] : std::map(watched_keys_))
            if (w == q) {
                srv_.unwatch(p_.conn(), k);
                watched_keys_.erase(k);
            }
        return;
    case type::set_timer: {
        auto gen = ++q->timer_gen;
        return p_.at_local(p_.local_now() + a.delay, [this, q, gen] {
            if (q->timer_gen == gen)
                waits_.feed(q, [](detail::predecessor_wait& w) { w.on_timer(); });
        });
    }
    case type::cancel_timer: ++q->timer_gen; return;
    case type::grant: {
        grant_notice g{static_cast<std::uint64_t>(q->mine),
                       std::min(q->ttl, ms_until(life_.raw_deadline(), q->first_send)), q->key,
                       static_cast<std::uint64_t>(lease_)};
        return tell_watch(q->token, watch_event::granted, g);
    }
    case type::resync: return tell_watch(q->token, watch_event::resync);
    }
}

void etcd_recipe::check_place(const queued_ptr& q)
{
    if (!watching(q->token))
        return waits_.feed(q, [](detail::predecessor_wait& w) { w.on_abandon(); });  // nobody listens
    p_.request(
        [this, q]() -> std::function<void()> {
            auto pl = srv_.predecessor(q->key, q->mine);
            return [this, q, pl] {
                waits_.feed(q, [&](detail::predecessor_wait& w) {
                    if (!pl.mine_exists)
                        w.on_gone();
                    else if (!pl.predecessor)
                        w.on_first();
                    else
                        w.on_behind(*pl.predecessor, pl.revision);
                });
            };
        },
        [this, q](error_code) { waits_.feed(q, [](detail::predecessor_wait& w) { w.on_check_failed(); }); });
}

void etcd_recipe::deleted(const std::string& key)
{
    auto it = watched_keys_.find(key);
    if (it == watched_keys_.end())
        return;
    auto q = it->second;
    waits_.feed(q, [&](detail::predecessor_wait& w) { w.on_predecessor_gone(key); });
}

void etcd_recipe::disconnected(int conn)
{
    srv_.unwatch_all(conn);
    // Every watch stream was cut: each wait looks again after a pause.
    for (auto& [k, q] : std::map(watched_keys_)) {
        watched_keys_.erase(k);
        waits_.feed(q, [&](detail::predecessor_wait& w) { w.on_watch_failed(k); });
    }
}

}  // namespace dlock::sim
