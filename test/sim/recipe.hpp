// SPDX-License-Identifier: BSL-1.0
// What a store's recipe does with the lock machine's store actions in a simulated process:
// the requests it sends on the process's connection, what it subscribes to, and what it
// tells the machine back. One per incarnation of a process (redis_recipe, etcd_recipe).
#pragma once

#include "core/lock_fsm.hpp"

#include <string>

namespace dlock::sim {

class recipe {
public:
    virtual ~recipe() = default;
    /// The machine's settings that follow the store's traits (hand-off, sessions).
    virtual void configure(detail::fsm_config& f) const = 0;
    virtual void attempt(const detail::fsm_action& a) = 0;
    virtual void renew(const detail::fsm_action& a) = 0;
    virtual void release(const detail::fsm_action& a) = 0;
    virtual void watch(const detail::fsm_action& a) = 0;
    virtual void unwatch() = 0;
    /// The connection is up again (after a drop): subscriptions are made anew.
    virtual void connected() = 0;
    /// The connection `conn` went (its server-side subscriptions with it).
    virtual void disconnected(int conn) = 0;
    /// The process crashed: what it held at the server stays there.
    virtual void crashed(int conn) = 0;
    /// Nothing of its own is still going on (a session, a wait).
    virtual bool idle() const = 0;
    /// What is still going on, for a liveness report.
    virtual std::string state() const { return {}; }
};

}  // namespace dlock::sim
