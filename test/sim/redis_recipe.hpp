// SPDX-License-Identifier: BSL-1.0
// redis_store's side of the lock in a simulated process: each store action one script on
// the Redis model, the watch a subscription to the name's release channel (and, with a
// token, to its grant channel), as src/redis/store.cpp does.
#pragma once

#include "process.hpp"
#include "recipe.hpp"
#include "redis_model.hpp"

#include <algorithm>
#include <string>

namespace dlock::sim {

class redis_recipe final : public recipe {
public:
    /// `handoff`: redis_store's direct hand-off (false: waiters are woken, as with wait_replicas);
    /// `setnx_then_expire`: the broken two-step acquire.
    redis_recipe(process& p, redis_model& srv, bool handoff, bool setnx_then_expire)
        : p_(p), srv_(srv), handoff_(handoff), setnx_then_expire_(setnx_then_expire)
    {
    }

    void configure(detail::fsm_config& f) const override
    {
        f.direct_handoff = handoff_;
        // redis_store batches renewals (store_traits::batches_renewals): each is late by up
        // to a grid step, as lock_driver sets it.
        if (handoff_)
            f.renew_grid =
                std::max(milliseconds(0), std::min(f.renew_every / 16, (f.lease - f.drift - f.renew_every) / 4));
    }
    void attempt(const detail::fsm_action& a) override;
    void renew(const detail::fsm_action& a) override;
    void release(const detail::fsm_action& a) override;
    void watch(const detail::fsm_action& a) override;
    void unwatch() override;
    void connected() override;
    void disconnected(int conn) override { srv_.unsubscribe_all(conn); }
    void crashed(int conn) override { srv_.unsubscribe_all(conn); }
    bool idle() const override { return true; }

    /// A publish on the release channel, or on `token`'s grant channel, has arrived.
    void released();
    void granted(const std::string& token, std::uint64_t fence, milliseconds ttl);

private:
    void subscribe(bool resync);
    // Feeds a store reply to the machine (unless the process is gone), then its actions.
    template <class F>
    auto to_machine(F f);

    process& p_;
    redis_model& srv_;
    bool handoff_, setnx_then_expire_;
    bool watching_ = false;
    std::string watch_token_;  // the watch's grant channel (direct hand-off), if any
};

}  // namespace dlock::sim
