// SPDX-License-Identifier: BSL-1.0
// postgres_store's side of the lock in a simulated process (src/postgres/store.cpp): each
// store action one statement on the PostgreSQL model, a release run again when it raced a
// hand-off, and the watch LISTEN on the release and grant channels: a queued token names
// the listening backend, so a waiter queues only while LISTEN is up. The store's listener
// is a second connection; here it shares the process's one (they break together).
#pragma once

#include "pg_model.hpp"
#include "process.hpp"
#include "recipe.hpp"

#include <string>

namespace dlock::sim {

class pg_recipe final : public recipe {
public:
    /// `fence_before_row`: broken as before issue 29, the acquire draws its fence when the
    /// statement starts, before it waits for the name's row.
    pg_recipe(process& p, pg_model& srv, bool fence_before_row) : p_(p), srv_(srv), fence_first_(fence_before_row) {}

    void configure(detail::fsm_config& f) const override { f.direct_handoff = true; }
    void attempt(const detail::fsm_action& a) override;
    void renew(const detail::fsm_action& a) override;
    void release(const detail::fsm_action& a) override;
    void watch(const detail::fsm_action& a) override;
    void unwatch() override;
    void connected() override;
    void disconnected(int conn) override;
    void crashed(int conn) override { srv_.unlisten(conn); }
    bool idle() const override { return true; }

    /// A NOTIFY on the release channel, or on the grant channel for `token`, has arrived.
    void released();
    void granted(const std::string& token, std::uint64_t fence, milliseconds ttl);

private:
    void listen();
    void send_release(const std::string& token, std::uint64_t id, int run);

    process& p_;
    pg_model& srv_;
    bool fence_first_;
    bool listener_started_ = false, listening_ = false;
    bool watching_ = false, told_ready_ = false;
    std::string watch_token_;
};

}  // namespace dlock::sim
