// SPDX-License-Identifier: BSL-1.0
#include "redis_recipe.hpp"

namespace dlock::sim {

using boost::system::error_code;

template <class F>
auto redis_recipe::to_machine(F f)
{
    return [this, f](auto&&... args) {
        f(p_.fsm(), args...);
        p_.step();
    };
}

void redis_recipe::attempt(const detail::fsm_action& a)
{
    auto token = a.token;
    auto queue = a.queue;
    auto ttl = p_.shared().cfg.lease;
    auto kind = p_.kind();
    if (kind == lease_kind::write && p_.shared().cfg.writer_as_reader)
        kind = lease_kind::read;
    auto done = to_machine(
        [this](detail::lock_fsm& m, error_code ec, acquire_result r) { m.on_attempt_done(ec, r, p_.local_now()); });
    p_.request(
        [this, token, ttl, queue, kind, done]() -> std::function<void()> {
            auto r = srv_.acquire(token, ttl, queue, p_.w().now(), kind);
            if (!setnx_then_expire_ || !r.acquired)
                return [done, r] { done(error_code(), r); };
            // The broken two-step acquire: EXPIRE sent once SETNX has answered.
            return [this, token, ttl, done, r] {
                p_.request(
                    [this, token, ttl, done, r]() -> std::function<void()> {
                        srv_.expire(token, ttl, p_.w().now());
                        return [done, r] { done(error_code(), r); };
                    },
                    [done](error_code ec) { done(ec, acquire_result{}); });
            };
        },
        [done](error_code ec) { done(ec, acquire_result{}); });
}

void redis_recipe::renew(const detail::fsm_action& a)
{
    auto token = a.token;
    auto ttl = p_.shared().cfg.lease;
    auto done = to_machine(
        [this](detail::lock_fsm& m, error_code ec, renew_result r) { m.on_renew_done(ec, r, p_.local_now()); });
    p_.request(
        [this, token, ttl, done]() -> std::function<void()> {
            auto r = srv_.renew(token, ttl, p_.w().now());
            return [done, r] { done(error_code(), r); };
        },
        [done](error_code ec) { done(ec, renew_result{}); });
}

void redis_recipe::release(const detail::fsm_action& a)
{
    auto token = a.token;
    auto id = a.id;
    auto done = to_machine([this, id](detail::lock_fsm& m, error_code ec, bool owned) {
        m.on_release_done(id, ec, owned, p_.local_now());
    });
    p_.request(
        [this, token, done]() -> std::function<void()> {
            bool owned = srv_.release(token, p_.w().now());
            return [done, owned] { done(error_code(), owned); };
        },
        [done](error_code ec) { done(ec, false); });
}

void redis_recipe::watch(const detail::fsm_action& a)
{
    watching_ = true;
    watch_token_ = a.token;
    if (p_.up())
        subscribe(false);
}

void redis_recipe::unwatch()
{
    watching_ = false;
    // UNSUBSCRIBE, answered before any later publish.
    srv_.subscribers().erase(p_.conn());
    if (!watch_token_.empty())
        srv_.grant_subscribers(watch_token_).erase(p_.conn());
    watch_token_.clear();
}

void redis_recipe::connected()
{
    if (watching_)
        subscribe(true);
}

void redis_recipe::subscribe(bool resync)
{
    auto conn = p_.conn();
    p_.request(
        [this, conn, resync]() -> std::function<void()> {
            if (watching_) {  // an UNSUBSCRIBE sent after it would come after it
                srv_.subscribers().insert(conn);
                if (!watch_token_.empty())
                    srv_.grant_subscribers(watch_token_).insert(conn);
            }
            return [this, resync] {
                if (watching_) {
                    p_.fsm().on_watch(resync ? watch_event::resync : watch_event::ready, {}, p_.local_now());
                    p_.step();
                }
            };
        },
        [](error_code) {});  // a lost subscription comes back with the connection (resync)
}

void redis_recipe::released()
{
    if (!watching_)
        return;
    p_.fsm().on_watch(watch_event::released, {}, p_.local_now());
    p_.step();
}

void redis_recipe::granted(const std::string& token, std::uint64_t fence, milliseconds ttl)
{
    if (!watching_ || watch_token_ != token)
        return;
    grant_notice g;
    g.fencing_token = fence;
    g.ttl = ttl;
    p_.fsm().on_watch(watch_event::granted, g, p_.local_now());
    p_.step();
}

}  // namespace dlock::sim
