// SPDX-License-Identifier: BSL-1.0
// What the etcd and ZooKeeper recipes share: a store whose leases live by the process's
// session (a direct hand-off from an inherent queue, renewals that confirm), tokened watches
// ready at once, the acquires and releases of a token kept in order (the kit's token_order),
// acquires waiting for the session to open, and a queued wait's grant or resync told to the
// machine's token watch.
#pragma once

#include "process.hpp"
#include "recipe.hpp"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace dlock::sim {

class session_recipe : public recipe {
public:
    explicit session_recipe(process& p) : p_(p) {}

    void configure(detail::fsm_config& f) const override
    {
        f.direct_handoff = true;
        f.inherent_queue = true;
        f.per_session = true;
        f.confirms = true;
    }
    void watch(const detail::fsm_action& a) override;
    void unwatch() override;
    void release(const detail::fsm_action& a) override;
    bool idle() const override { return pending_ == 0 && gate_.empty() && after_acquire_.empty(); }

protected:
    using reply_fn = std::function<void(boost::system::error_code)>;

    /// Nobody waits for `token`'s grant any more: its queued wait ends.
    virtual void dropped(const std::string& token) = 0;
    /// Sends the release of `a` (its acquire, if any, has ended).
    virtual void send_release(const detail::fsm_action& a, bool again) = 0;

    /// An acquire of `token` begins: its releases wait for it to end.
    void begin(const std::string& token) { after_acquire_[token]; }
    /// The acquire of `token` ends: the machine hears it, then the releases that waited go.
    void acquired(const std::string& token, boost::system::error_code ec, acquire_result r);
    /// A release ends: the machine hears it.
    void released(std::uint64_t id, boost::system::error_code ec, bool held);
    /// Waits for the session (`open` starts opening it when nobody did yet); opened() ends the wait.
    void wait_session(reply_fn cont, const std::function<void()>& open);
    void opened(boost::system::error_code ec);
    /// The machine hears a session event, or its token watch hears `ev` (if still watching `token`).
    void tell(session_event ev, const session_info& info);
    void tell_watch(const std::string& token, watch_event ev, const grant_notice& g = {});
    bool watching(const std::string& token) const { return watching_ && watch_token_ == token; }

    process& p_;
    const std::string name_ = "n";  // the one lock name of a schedule
    int pending_ = 0;               // releases in flight

private:
    std::string watch_token_;
    bool watching_ = false, opening_ = false;
    std::vector<reply_fn> gate_;                                               // acquires waiting for the session
    std::map<std::string, std::vector<std::function<void()>>> after_acquire_;  // token order
};

}  // namespace dlock::sim
