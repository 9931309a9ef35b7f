// SPDX-License-Identifier: BSL-1.0
// One MariaDB table as mariadb_store's statements use it (src/mariadb/sql.cpp): the name's
// row {owner, fence, expires_at, contended, signal_conn} judged on the server's clock, the
// fencing sequence drawn only once the row is ours, and the name's signal lock: a named lock
// (GET_LOCK) the holder's connection takes with its lease and gives back when the lease ends
// (the reconcile step) or its connection goes; waiters block on it from other connections and
// wake when it is given back. The broken variant draws its fence when the statement starts.
#pragma once

#include <dlock/store.hpp>

#include "world.hpp"

#include <deque>
#include <functional>
#include <optional>
#include <set>
#include <string>

namespace dlock::sim {

class maria_model {
public:
    explicit maria_model(world& w) : w_(w) {}

    /// What an acquire's SELECT says: ours, the fence, the holder's remaining lease, and
    /// whether the holder's connection has the signal lock (a GET_LOCK wait will end with it).
    struct acquire_reply {
        acquire_result result;
        bool signal = false;
    };

    std::uint64_t nextval() noexcept { return ++sequence_; }
    /// INSERT .. ON DUPLICATE KEY UPDATE (free, expired or ours is taken; ours keeps its fence),
    /// the fence drawn under the row if the name is newly ours (`drawn`: drawn before, the
    /// broken recipe), the signal lock taken by `conn` for a live lease of ours.
    acquire_reply acquire(const std::string& token, milliseconds ttl, int conn, real_time now,
                          std::optional<std::uint64_t> drawn = std::nullopt);
    /// Ours and live: `ttl` from now, the signal lock taken if not yet; then the reconcile.
    renew_result renew(const std::string& token, milliseconds ttl, int conn, real_time now);
    /// Ours: the row deleted (true if it was live); then the reconcile.
    bool release(const std::string& token, int conn, real_time now);
    /// How a GET_LOCK wait ended.
    enum class wait_end {
        had,        ///< it had the lock (the holder let go, or nobody had it), and gave it back
        timed_out,  ///< GET_LOCK returned 0
        aborted     ///< its connection was shut down
    };
    /// GET_LOCK(signal, timeout) on a wait connection, given back at once.
    void wait(int wait_conn, real_time timeout, std::function<void(wait_end)> done);
    /// The wait connection is shut down (wait_pool's abort): its wait ends `aborted`.
    void abort_wait(int wait_conn);
    /// A connection went: its named lock is given back (its waiters wake), its waits end.
    void connection_closed(int conn);

    std::optional<std::string> holder(real_time now) const;
    std::uint64_t fence() const noexcept { return row_ ? row_->fence : 0; }
    /// The connection holding the signal lock (0: none).
    int signal_holder() const noexcept { return signal_; }
    /// A signal lock held with no live lease behind it, and waits still blocked.
    std::string leftovers(real_time now) const;

    /// Wait connections are numbered apart from main ones: wait_conn(conn, slot).
    static int wait_conn(int conn, std::size_t slot) { return -(conn * 16 + static_cast<int>(slot) + 1); }
    static int owner_of(int wait_conn) { return (-wait_conn - 1) / 16; }

private:
    struct lock_row {
        std::string owner;
        std::uint64_t fence = 0;
        real_time expires{0};
        bool contended = false;
        int signal_conn = 0;  // 0: NULL
    };
    struct blocked {
        int conn = 0;
        std::uint64_t id = 0;
        std::function<void(wait_end)> done;
    };
    bool live(real_time now) const { return row_ && row_->expires > now; }
    void take_signal(const std::string& token, int conn, real_time now);
    void reconcile(int conn, real_time now);
    void give_back();  // RELEASE_LOCK: the first blocked wait has it, and gives it back at once

    world& w_;
    std::uint64_t sequence_ = 0, next_wait_ = 0;
    std::optional<lock_row> row_;
    int signal_ = 0;
    std::deque<blocked> blocked_;
    std::set<int> closed_;  // connections gone: a statement of theirs still running keeps no named lock
};

}  // namespace dlock::sim
