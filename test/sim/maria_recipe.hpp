// SPDX-License-Identifier: BSL-1.0
// mariadb_store's side of the lock in a simulated process (src/mariadb/store.cpp): each
// store action one multi-statement query on the MariaDB model, and the release notifications
// the real wait_pool (src/mariadb/wait_pool.hpp) decides: a refused attempt that finds the
// holder with its signal lock starts a GET_LOCK wait on a connection of the pool, whose end
// tells the watch `released` or `resync`. The store's wait connections are connections of
// their own; here they share the process's network path (they break with it).
#pragma once

#include "maria_model.hpp"
#include "mariadb/wait_pool.hpp"
#include "process.hpp"
#include "recipe.hpp"

#include <string>

namespace dlock::sim {

class maria_recipe final : public recipe {
public:
    /// `fence_before_row`: broken as before issue 29, the acquire draws its fence when the
    /// statement starts (in VALUES), before it waits for the name's row.
    maria_recipe(process& p, maria_model& srv, bool fence_before_row) : p_(p), srv_(srv), fence_first_(fence_before_row)
    {
    }

    void configure(detail::fsm_config&) const override {}  // no hand-off: waiters are woken
    void attempt(const detail::fsm_action& a) override;
    void renew(const detail::fsm_action& a) override;
    void release(const detail::fsm_action& a) override;
    void watch(const detail::fsm_action& a) override;
    void unwatch() override;
    void connected() override {}
    void disconnected(int conn) override { srv_.connection_closed(conn); }
    void crashed(int conn) override { srv_.connection_closed(conn); }
    bool idle() const override { return true; }
    std::string state() const override { return std::string("wait pool: ") + pool_.state(name_); }

private:
    void perform();
    void start_wait(std::size_t slot, milliseconds timeout);
    void wait_done(std::size_t slot, mariadb::detail::wait_end end);

    static inline const std::string name_ = "x";  // the one name of a schedule
    process& p_;
    maria_model& srv_;
    bool fence_first_;
    bool watching_ = false;
    mariadb::detail::wait_pool pool_{4};  // mariadb::config's wait_connections
};

}  // namespace dlock::sim
