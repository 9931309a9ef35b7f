// SPDX-License-Identifier: BSL-1.0
// redlock_store's side of the lock in a simulated process (src/redis/redlock_store.cpp): every
// store action fanned out to N Redis nodes and decided by the real majority vote
// (redis::tally): an acquire asks every node, and with a quorum of grants whose counters do
// not all agree, raises every node's counter to the highest and waits for a quorum still
// holding; a failed acquire releases everywhere; renewals and releases are quorum votes; the
// watch is ready once a quorum of nodes' release channels listens. The nodes share the
// process's network path here (in the store each has its own connection); a node restarting
// fails the requests that reach it while it is down.
#pragma once

#include "process.hpp"
#include "recipe.hpp"
#include "redis_model.hpp"

#include <memory>
#include <string>
#include <vector>

namespace dlock::sim {

/// The nodes of a Redlock deployment, and until when each is down (restarting).
struct redlock_nodes {
    std::vector<redis_model> nodes;
    std::vector<real_time> down_until;
};

class redlock_recipe final : public recipe {
public:
    redlock_recipe(process& p, redlock_nodes& n) : p_(p), n_(n), confirmed_(n.nodes.size(), 0) {}

    void configure(detail::fsm_config&) const override {}  // no hand-off: waiters are woken
    void attempt(const detail::fsm_action& a) override;
    void renew(const detail::fsm_action& a) override;
    void release(const detail::fsm_action& a) override;
    void watch(const detail::fsm_action& a) override;
    void unwatch() override;
    void connected() override;
    void disconnected(int conn) override { unsubscribe(conn); }
    void crashed(int conn) override { unsubscribe(conn); }
    bool idle() const override { return true; }

    /// A publish on node `i`'s release channel has arrived.
    void released(std::size_t i);
    /// Node `i` restarted and is back: its subscription is made again.
    void node_back(std::size_t i);

private:
    struct acquire_op;
    // Node `i`'s answer to `f`, or connection_lost if the node is down when it arrives.
    template <class R, class F, class Done>
    void to_node(std::size_t i, F f, Done done);
    void on_grant(const std::shared_ptr<acquire_op>& s, std::size_t i, boost::system::error_code ec,
                  const acquire_result& r);
    void send_raise(const std::shared_ptr<acquire_op>& s, std::size_t i, bool counted);
    void succeed(const std::shared_ptr<acquire_op>& s);
    void fail(const std::shared_ptr<acquire_op>& s, boost::system::error_code ec, milliseconds hint);
    void release_everywhere(const std::string& token);
    void subscribe(std::size_t i);
    void unsubscribe(int conn);
    std::size_t size() const noexcept { return n_.nodes.size(); }
    std::size_t quorum() const noexcept { return size() / 2 + 1; }

    process& p_;
    redlock_nodes& n_;
    bool watching_ = false, ready_sent_ = false;
    std::vector<char> confirmed_;  // per node: its subscription was confirmed once
    std::size_t confirmed_count_ = 0;
};

}  // namespace dlock::sim
