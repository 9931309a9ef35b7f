// SPDX-License-Identifier: BSL-1.0
// memcached_store's side of the lock in a simulated process (src/memcached/store.cpp): each
// store action the store's real machine of steps (acquire_steps, owner_steps), one round
// trip per step, its bytes run by the memcached model. memcached has no notifications: the
// watch is ready at once and never hears a release; waiters sleep on the holder's lease.
#pragma once

#include "memcached/acquire_steps.hpp"
#include "memcached/owner_steps.hpp"
#include "memcached_model.hpp"
#include "process.hpp"
#include "recipe.hpp"

#include <memory>
#include <string>

namespace dlock::sim {

class memcached_recipe final : public recipe {
public:
    memcached_recipe(process& p, memcached_model& srv);

    void configure(detail::fsm_config&) const override {}
    void attempt(const detail::fsm_action& a) override;
    void renew(const detail::fsm_action& a) override;
    void release(const detail::fsm_action& a) override;
    void watch(const detail::fsm_action& a) override;
    void unwatch() override { watching_ = false; }
    void connected() override {}
    void disconnected(int) override {}
    void crashed(int) override {}
    bool idle() const override { return true; }

    /// The keys of the schedule's one name, as memcached_store::keys_of() makes them.
    static memcached::name_keys keys();

private:
    // Sends the machine's current step; `done` once it has finished (or its exec failed).
    template <class Steps>
    void run(std::shared_ptr<Steps> s, std::function<void(boost::system::error_code)> done);

    process& p_;
    memcached_model& srv_;
    bool watching_ = false;
};

}  // namespace dlock::sim
