// SPDX-License-Identifier: BSL-1.0
#include "session_recipe.hpp"

namespace dlock::sim {

using boost::system::error_code;

// A tokened watch is ready at once: the queued attempt anchors the wait.
void session_recipe::watch(const detail::fsm_action& a)
{
    watching_ = true;
    watch_token_ = a.token;
    p_.later(real_time(0), [this] {
        if (watching_) {
            p_.fsm().on_watch(watch_event::ready, {}, p_.local_now());
            p_.step();
        }
    });
}

void session_recipe::unwatch()
{
    watching_ = false;
    dropped(watch_token_);
    watch_token_.clear();
}

void session_recipe::release(const detail::fsm_action& a)
{
    dropped(a.token);
    ++pending_;
    if (auto it = after_acquire_.find(a.token); it != after_acquire_.end())
        return it->second.push_back([this, a] { send_release(a, false); });
    send_release(a, false);
}

void session_recipe::acquired(const std::string& token, error_code ec, acquire_result r)
{
    p_.fsm().on_attempt_done(ec, r, p_.local_now());
    p_.step();
    auto it = after_acquire_.find(token);
    if (it == after_acquire_.end())
        return;
    auto later = std::move(it->second);
    after_acquire_.erase(it);
    for (auto& f : later)
        f();
}

void session_recipe::released(std::uint64_t id, error_code ec, bool held)
{
    --pending_;
    p_.fsm().on_release_done(id, ec, held, p_.local_now());
    p_.step();
}

void session_recipe::wait_session(reply_fn cont, const std::function<void()>& open)
{
    gate_.push_back(std::move(cont));
    if (!std::exchange(opening_, true))
        open();
}

void session_recipe::opened(error_code ec)
{
    opening_ = false;
    auto waiting = std::move(gate_);
    gate_.clear();
    for (auto& f : waiting)
        f(ec);
}

void session_recipe::tell(session_event ev, const session_info& info)
{
    p_.fsm().on_session(ev, info, p_.local_now());
    p_.step();
}

void session_recipe::tell_watch(const std::string& token, watch_event ev, const grant_notice& g)
{
    if (!watching(token))
        return;
    p_.fsm().on_watch(ev, g, p_.local_now());
    p_.step();
}

}  // namespace dlock::sim
