// SPDX-License-Identifier: BSL-1.0
#include "pg_recipe.hpp"

namespace dlock::sim {

using boost::system::error_code;

void pg_recipe::attempt(const detail::fsm_action& a)
{
    auto token = a.token;
    auto ttl = p_.shared().cfg.lease;
    // The waiter's listening backend, while LISTEN is up (0: not queued, woken by resync).
    int listener = a.queue && listening_ ? p_.conn() : 0;
    auto done = [this](error_code ec, acquire_result r) {
        p_.fsm().on_attempt_done(ec, r, p_.local_now());
        p_.step();
    };
    auto drawn = std::make_shared<std::optional<std::uint64_t>>();
    std::function<void()> arrived;
    if (fence_first_)
        arrived = [&srv = srv_, drawn] { *drawn = srv.nextval(); };
    p_.request(
        std::move(arrived),
        [&srv = srv_, &w = p_.w(), token, ttl, listener, drawn, done]() -> std::function<void()> {
            auto r = srv.acquire(token, ttl, listener, w.now(), *drawn);
            return [done, r] { done(error_code(), r); };
        },
        [done](error_code ec) { done(ec, acquire_result{}); }, p_.statement_stall());
}

void pg_recipe::renew(const detail::fsm_action& a)
{
    auto token = a.token;
    auto ttl = p_.shared().cfg.lease;
    auto done = [this](error_code ec, renew_result r) {
        p_.fsm().on_renew_done(ec, r, p_.local_now());
        p_.step();
    };
    p_.request(
        nullptr,
        [&srv = srv_, &w = p_.w(), token, ttl, done]() -> std::function<void()> {
            auto r = srv.renew(token, ttl, w.now());
            return [done, r] { done(error_code(), r); };
        },
        [done](error_code ec) { done(ec, renew_result{}); }, p_.statement_stall());
}

void pg_recipe::release(const detail::fsm_action& a)
{
    send_release(a.token, a.id, 0);
}

// Twice at most: a withdrawn token that a concurrent release handed the name to holds it
// now, and the second run hands it on or frees it.
void pg_recipe::send_release(const std::string& token, std::uint64_t id, int run)
{
    auto done = [this, id](error_code ec, bool owned) {
        p_.fsm().on_release_done(id, ec, owned, p_.local_now());
        p_.step();
    };
    p_.request(
        nullptr,
        [this, &srv = srv_, &w = p_.w(), token, id, run, done]() -> std::function<void()> {
            auto out = srv.release(token, w.now());
            return [this, token, id, run, done, out] {
                if (out.raced && run == 0)
                    return send_release(token, id, 1);
                done(error_code(), out.held);
            };
        },
        [done](error_code ec) { done(ec, false); }, p_.statement_stall());
}

void pg_recipe::watch(const detail::fsm_action& a)
{
    watching_ = true;
    told_ready_ = false;
    watch_token_ = a.token;
    if (listening_) {  // LISTEN hears every name: this one too, at once
        told_ready_ = true;
        return p_.later(real_time(0), [this] {
            if (watching_) {
                p_.fsm().on_watch(watch_event::ready, {}, p_.local_now());
                p_.step();
            }
        });
    }
    if (!listener_started_) {
        listener_started_ = true;
        if (p_.up())
            listen();
    }
}

void pg_recipe::unwatch()
{
    watching_ = false;
    watch_token_.clear();
}

void pg_recipe::connected()
{
    if (listener_started_)
        listen();
}

void pg_recipe::disconnected(int conn)
{
    listening_ = false;
    srv_.unlisten(conn);  // the backend ends with its connection
}

// LISTEN ran (again): `resync` for a watcher told `ready` before (it may have missed one),
// `ready` for a new one.
void pg_recipe::listen()
{
    auto conn = p_.conn();
    p_.request(
        [this, conn]() -> std::function<void()> {
            srv_.listen(conn);
            return [this] {
                listening_ = true;
                if (!watching_)
                    return;
                p_.fsm().on_watch(told_ready_ ? watch_event::resync : watch_event::ready, {}, p_.local_now());
                told_ready_ = true;
                p_.step();
            };
        },
        [](error_code) {});  // a lost LISTEN comes back with the connection
}

void pg_recipe::released()
{
    if (!watching_ || !told_ready_)
        return;
    p_.fsm().on_watch(watch_event::released, {}, p_.local_now());
    p_.step();
}

void pg_recipe::granted(const std::string& token, std::uint64_t fence, milliseconds ttl)
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
