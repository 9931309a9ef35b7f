// SPDX-License-Identifier: BSL-1.0
// etcd_store's side of the lock in a simulated process, as src/etcd/ does it: one lease per
// process as its session (granted at the first acquire, kept alive each third of its TTL,
// lost at its local deadline: the real session_life), keys in etcd's Mutex layout (the real
// key_slots), a queued token's wait for its predecessor's deletion (the real
// predecessor_wait in a wait_queue), grants and resyncs told to the machine's token watch.
#pragma once

#include "common/predecessor_wait.hpp"
#include "common/session_life.hpp"
#include "etcd/key_slots.hpp"
#include "etcd_model.hpp"
#include "session_recipe.hpp"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dlock::sim {

class etcd_recipe final : public session_recipe {
public:
    /// Broken variants. `from_reply`: a keep-alive's deadline counted from its reply, not its
    /// send. `release_once`: a release whose reply was lost is not asked again.
    etcd_recipe(process& p, etcd_model& srv, bool from_reply = false, bool release_once = false)
        : session_recipe(p), srv_(srv), rng_(static_cast<std::uint32_t>(p.w().draw())), from_reply_(from_reply),
          release_once_(release_once)
    {
    }

    void attempt(const detail::fsm_action& a) override;
    void renew(const detail::fsm_action& a) override;
    void connected() override {}
    void disconnected(int conn) override;
    void crashed(int conn) override { srv_.unwatch_all(conn); }
    std::string state() const override
    {
        return "lease " + std::to_string(lease_) + ", " + std::to_string(pending_) + " releases";
    }

    /// The watched key `key` was deleted (a watch event).
    void deleted(const std::string& key);

private:
    struct queued {
        std::string name, token, key;
        std::int64_t mine = 0;
        detail::time_point first_send{};
        milliseconds ttl{0};
        detail::predecessor_wait wait;
        std::uint64_t timer_gen = 0;
        explicit queued(std::minstd_rand* rng) : wait(rng) {}
    };
    using queued_ptr = std::shared_ptr<queued>;

    // The session.
    void ensure_session(std::function<void(boost::system::error_code)> cont);
    void grant();
    void arm_keepalive();
    void arm_deadline();
    void keepalive();
    void session_gone();
    void tell(session_event ev) { session_recipe::tell(ev, life_.info()); }
    // Keys, acquires, releases.
    std::string key_for(const std::string& token) const;
    void send_acquire(const detail::fsm_action& a, bool retried);
    void send_release(const detail::fsm_action& a, bool again) override;
    void dropped(const std::string& token) override { waits_.drop(name_, token); }
    // Queued waits.
    void perform(const queued_ptr& q, const detail::wait_action& a);
    void check_place(const queued_ptr& q);

    etcd_model& srv_;
    std::minstd_rand rng_;
    bool from_reply_, release_once_;
    std::int64_t lease_ = 0;
    detail::session_life life_;
    std::uint64_t keepalive_gen_ = 0, deadline_gen_ = 0;
    etcd::detail::key_slots slots_;
    bool contended_ = false;  // another token of ours asked while one of ours held
    detail::wait_queue<queued> waits_{[this](const queued_ptr& q, const detail::wait_action& a) { perform(q, a); }};
    std::map<std::string, queued_ptr> watched_keys_;  // a predecessor's key -> the wait watching it
};

}  // namespace dlock::sim
