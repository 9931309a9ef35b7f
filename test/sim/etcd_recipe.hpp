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
#include "process.hpp"
#include "recipe.hpp"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dlock::sim {

class etcd_recipe final : public recipe {
public:
    /// `from_reply`: broken, a keep-alive's deadline counted from its reply, not its send.
    etcd_recipe(process& p, etcd_model& srv, bool from_reply = false)
        : p_(p), srv_(srv), rng_(static_cast<std::uint32_t>(p.w().draw())), from_reply_(from_reply)
    {
    }

    void configure(detail::fsm_config& f) const override
    {
        f.direct_handoff = true;
        f.inherent_queue = true;
        f.per_session = true;
        f.confirms = true;
    }
    void attempt(const detail::fsm_action& a) override;
    void renew(const detail::fsm_action& a) override;
    void release(const detail::fsm_action& a) override;
    void watch(const detail::fsm_action& a) override;
    void unwatch() override;
    void connected() override {}
    void disconnected(int conn) override;
    void crashed(int conn) override { srv_.unwatch_all(conn); }
    std::string state() const override
    {
        return "lease " + std::to_string(lease_) + ", " + std::to_string(pending_releases_) + " releases, " +
               std::to_string(gate_.size()) + " waiting for the lease, " + std::to_string(after_acquire_.size()) +
               " acquires in flight, watching " + (watching_ ? watch_token_ : "-");
    }
    bool idle() const override { return pending_releases_ == 0 && gate_.empty() && after_acquire_.empty(); }

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
    void tell(session_event ev);
    // Keys, acquires, releases.
    std::string key_for(const std::string& token) const;
    void send_acquire(const detail::fsm_action& a, bool retried);
    void acquired(const std::string& token, boost::system::error_code ec, acquire_result r);
    void send_release(std::string token, std::string ref, std::uint64_t id, bool again = false);
    // Queued waits.
    void perform(const queued_ptr& q, const detail::wait_action& a);
    void check_place(const queued_ptr& q);

    process& p_;
    etcd_model& srv_;
    std::minstd_rand rng_;
    bool from_reply_;
    const std::string name_ = "n";  // the one lock name of a schedule
    std::int64_t lease_ = 0;
    detail::session_life life_;
    std::uint64_t keepalive_gen_ = 0, deadline_gen_ = 0;
    std::vector<std::function<void(boost::system::error_code)>> gate_;  // acquires waiting for the lease
    bool granting_ = false;
    etcd::detail::key_slots slots_;
    bool contended_ = false;  // another token of ours asked while one of ours held
    std::map<std::string, std::vector<std::function<void()>>> after_acquire_;  // token order
    std::string watch_token_;
    bool watching_ = false;
    int pending_releases_ = 0;
    detail::wait_queue<queued> waits_{[this](const queued_ptr& q, const detail::wait_action& a) { perform(q, a); }};
    std::map<std::string, queued_ptr> watched_keys_;  // a predecessor's key -> the wait watching it
};

}  // namespace dlock::sim
