// SPDX-License-Identifier: BSL-1.0
#include "maria_recipe.hpp"

namespace dlock::sim {

using boost::system::error_code;
using mariadb::detail::pool_action;
using mariadb::detail::wait_end;

void maria_recipe::attempt(const detail::fsm_action& a)
{
    auto token = a.token;
    auto ttl = p_.shared().cfg.lease;
    auto conn = p_.conn();
    // A refused attempt tells the GET_LOCK waits what it saw of the holder; unless a wait
    // will wake the waiters, they sleep the holder's lease, spread a little.
    auto done = [this](error_code ec, maria_model::acquire_reply r) {
        auto out = r.result;
        if (!ec && !out.acquired) {
            bool woken = pool_.observe(name_, r.signal, out.holder_ttl, watching_);
            perform();
            if (!woken && out.holder_ttl.count() > 0)
                out.holder_ttl +=
                    milliseconds(p_.w().uniform(0, std::min<std::int64_t>(out.holder_ttl.count() / 10 + 1, 50)));
        }
        p_.fsm().on_attempt_done(ec, out, p_.local_now());
        p_.step();
    };
    auto drawn = std::make_shared<std::optional<std::uint64_t>>();
    std::function<void()> arrived;
    if (fence_first_)
        arrived = [&srv = srv_, drawn] { *drawn = srv.nextval(); };
    p_.request(
        std::move(arrived),
        [&srv = srv_, &w = p_.w(), token, ttl, conn, drawn, done]() -> std::function<void()> {
            auto r = srv.acquire(token, ttl, conn, w.now(), *drawn);
            return [done, r] { done(error_code(), r); };
        },
        [done](error_code ec) { done(ec, {}); }, p_.statement_stall());
}

void maria_recipe::renew(const detail::fsm_action& a)
{
    auto token = a.token;
    auto ttl = p_.shared().cfg.lease;
    auto conn = p_.conn();
    auto done = [this](error_code ec, renew_result r) {
        p_.fsm().on_renew_done(ec, r, p_.local_now());
        p_.step();
    };
    p_.request(
        nullptr,
        [&srv = srv_, &w = p_.w(), token, ttl, conn, done]() -> std::function<void()> {
            auto r = srv.renew(token, ttl, conn, w.now());
            return [done, r] { done(error_code(), r); };
        },
        [done](error_code ec) { done(ec, renew_result{}); }, p_.statement_stall());
}

void maria_recipe::release(const detail::fsm_action& a)
{
    auto token = a.token;
    auto id = a.id;
    auto conn = p_.conn();
    auto done = [this, id](error_code ec, bool held) {
        p_.fsm().on_release_done(id, ec, held, p_.local_now());
        p_.step();
    };
    p_.request(
        nullptr,
        [&srv = srv_, &w = p_.w(), token, conn, done]() -> std::function<void()> {
            bool held = srv.release(token, conn, w.now());
            return [done, held] { done(error_code(), held); };
        },
        [done](error_code ec) { done(ec, false); }, p_.statement_stall());
}

// A named lock is state: a wait started after the next refused attempt sees any release
// after it, so the watch is ready at once.
void maria_recipe::watch(const detail::fsm_action&)
{
    watching_ = true;
    p_.later(real_time(0), [this] {
        if (watching_) {
            p_.fsm().on_watch(watch_event::ready, {}, p_.local_now());
            p_.step();
        }
    });
}

void maria_recipe::unwatch()
{
    watching_ = false;
    pool_.on_unwatched(name_);  // a wait for it ends now: its connection is free for others
    perform();
}

void maria_recipe::perform()
{
    for (auto& a : std::exchange(pool_.actions(), {})) {
        switch (a.t) {
        case pool_action::type::open: break;  // a connection of the process's path
        case pool_action::type::wait: start_wait(a.slot, a.timeout); break;
        case pool_action::type::abort: {
            auto wc = maria_model::wait_conn(p_.conn(), a.slot);
            p_.request(
                [&srv = srv_, wc]() -> std::function<void()> {
                    srv.abort_wait(wc);  // the shutdown of its socket, as the server sees it
                    return [] {};
                },
                [](error_code) {});
            break;
        }
        case pool_action::type::released:
        case pool_action::type::resync:
            if (watching_) {
                auto ev = a.t == pool_action::type::released ? watch_event::released : watch_event::resync;
                p_.later(real_time(0), [this, ev] {
                    if (watching_) {
                        p_.fsm().on_watch(ev, {}, p_.local_now());
                        p_.step();
                    }
                });
            }
            break;
        }
    }
}

void maria_recipe::start_wait(std::size_t slot, milliseconds timeout)
{
    auto wc = maria_model::wait_conn(p_.conn(), slot);
    p_.request_deferred(
        [this, &srv = srv_, wc, slot, timeout](const process::reply_fn& reply) {
            srv.wait(wc, timeout, [this, reply, slot](maria_model::wait_end e) {
                auto end = e == maria_model::wait_end::had         ? wait_end::released
                           : e == maria_model::wait_end::timed_out ? wait_end::timed_out
                                                                   : wait_end::failed;
                reply([this, slot, end] { wait_done(slot, end); });
            });
        },
        [this, slot](error_code) { wait_done(slot, wait_end::failed); }, timeout + p_.shared().cfg.request_timeout);
}

void maria_recipe::wait_done(std::size_t slot, wait_end end)
{
    pool_.on_done(slot, end, watching_);
    perform();
}

}  // namespace dlock::sim
