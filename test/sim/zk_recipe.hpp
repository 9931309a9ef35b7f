// SPDX-License-Identifier: BSL-1.0
// zookeeper_store's side of the lock in a simulated process, as src/zookeeper/ does it: one
// session per process (pings each third of its timeout, any answered request dating it,
// lost at its local deadline: the real session_life), an acquire round (create and children
// read back to back) judged by the real judge() and recipe::find on Curator's node names
// (the real recipe.hpp), a create or delete whose reply was lost found again by its guid,
// and a queued token's wait for its predecessor's deletion (the real predecessor_wait,
// without retries: a failure ends the wait with resync).
#pragma once

#include "common/predecessor_wait.hpp"
#include "common/session_life.hpp"
#include "session_recipe.hpp"
#include "zk_model.hpp"
#include "zookeeper/acquire_round.hpp"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dlock::sim {

class zk_recipe final : public session_recipe {
public:
    /// `from_reply`: broken, an answer dates the session from its arrival, not its send.
    zk_recipe(process& p, zk_model& srv, bool from_reply = false)
        : session_recipe(p), srv_(srv), from_reply_(from_reply)
    {
    }

    void attempt(const detail::fsm_action& a) override;
    void renew(const detail::fsm_action& a) override;
    void connected() override;
    void disconnected(int conn) override { srv_.unwatch_all(conn); }
    void crashed(int conn) override { srv_.unwatch_all(conn); }
    std::string state() const override
    {
        return "session " + std::to_string(sid_) + ", " + std::to_string(pending_) + " releases";
    }

    /// The watched child `name` was deleted (a watch event).
    void deleted(const std::string& name);

private:
    struct node_state {
        std::string node;
        std::int64_t czxid = 0;
        bool uncertain = false, held = false;
    };
    struct queued {
        std::string name, token;
        milliseconds ttl{0};
        std::int64_t session = 0;
        detail::predecessor_wait wait{};
    };
    using queued_ptr = std::shared_ptr<queued>;

    // A request of the session `sid_`: an answer dates the session (heard), a failure is `failed`.
    void zk_request(std::function<std::function<void()>()> apply, reply_fn failed);
    // The session.
    void ensure_session(reply_fn cont);
    void open();
    void arm_ping();
    void arm_deadline();
    void session_gone();
    void tell(session_event ev) { session_recipe::tell(ev, life_.info()); }
    // Acquires and releases.
    void round(const detail::fsm_action& a, bool retried);
    void find_lost(const std::string& token, std::function<void()> then, reply_fn failed);
    void send_release(const detail::fsm_action& a, bool again) override;
    void dropped(const std::string& token) override { waits_.drop(name_, token); }
    // Queued waits.
    void perform(const queued_ptr& q, const detail::wait_action& a);
    void read_place(const queued_ptr& q);

    zk_model& srv_;
    bool from_reply_;
    std::int64_t sid_ = 0;
    detail::session_life life_;
    std::uint64_t ping_gen_ = 0, deadline_gen_ = 0;
    std::map<std::string, node_state> nodes_;  // per token
    bool contended_ = false;
    detail::wait_queue<queued> waits_{[this](const queued_ptr& q, const detail::wait_action& a) { perform(q, a); }};
    std::map<std::string, queued_ptr> watched_;  // a predecessor's name -> the wait watching it
};

}  // namespace dlock::sim
