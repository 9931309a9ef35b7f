// SPDX-License-Identifier: BSL-1.0
// One PostgreSQL table as postgres_store's statements use it (src/postgres/sql.cpp): the
// name's row {owner, fence, expires_at, contended} judged on the server's clock, the one
// sequence that draws fences and queue positions, the hand-off queue of tokens whose
// listening backend must still exist, and NOTIFY on the release and grant channels. Each
// statement is one step applied at the server's time, as the name's turn (an advisory lock
// taken first) makes it; the broken variant draws its fence before that turn.
#pragma once

#include <dlock/store.hpp>

#include "world.hpp"

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace dlock::sim {

class pg_model {
public:
    /// What a release did (postgres::sql::release_outcome).
    struct release_outcome {
        bool held = false;   ///< the row was ours and live
        bool raced = false;  ///< a withdrawn token was handed the name meanwhile
    };

    /// nextval() on the table's sequence.
    std::uint64_t nextval() noexcept { return ++sequence_; }
    /// The acquire statement: free, expired or ours is taken (ours keeps its fence), unless
    /// live waiters queued before us: the first is handed it (a grant NOTIFY) and we are
    /// refused; held by another is marked contended and, with a listener (a backend's
    /// connection, 0: none), the token queued until one waiter lease after the holder's end. `drawn`: a fence
    /// drawn before the statement's turn (the broken recipe); else drawn in it.
    acquire_result acquire(const std::string& token, milliseconds ttl, int listener, real_time now,
                           std::optional<std::uint64_t> drawn = std::nullopt);
    /// ours and live: the lease runs `ttl` from now; the reply says whether it was contended.
    renew_result renew(const std::string& token, milliseconds ttl, real_time now);
    /// Ours (any owner's with `force`): handed to the first live queued token whose listener
    /// still exists (a new fence, NOTIFY on the grant channel), else deleted (NOTIFY on the
    /// release channel). The token's own queue row, expired rows and dead listeners' rows go.
    release_outcome release(const std::string& token, real_time now, bool force = false);

    /// LISTEN of a backend (its connection), and its end (the backend is gone).
    void listen(int conn) { listeners_.insert(conn); }
    void unlisten(int conn) { listeners_.erase(conn); }
    const std::set<int>& listeners() const noexcept { return listeners_; }

    /// A NOTIFY on the release channel, and on the grant channel.
    std::function<void()> on_release;
    std::function<void(const std::string& token, std::uint64_t fence, milliseconds ttl)> on_grant;
    /// Called when an acquire takes the name while `waiter`, queued before `taker` (or at
    /// all), is still queued live with its listener: FIFO broken.
    std::function<void(const std::string& taker, const std::string& waiter)> on_barge;

    /// Who holds the name at `now` (an expired row holds nothing, though it stays until the
    /// name is taken or released again).
    std::optional<std::string> holder(real_time now) const;
    /// The holder's fence (0: no row), and the unexpired queue rows (as the status statement counts them).
    std::uint64_t fence() const noexcept { return row_ ? row_->fence : 0; }
    std::size_t queued(real_time now) const;
    /// Unexpired queue rows whose listener still exists.
    std::string leftovers(real_time now) const;

private:
    struct lock_row {
        std::string owner;
        std::uint64_t fence = 0;
        real_time expires{0};
        bool contended = false;
    };
    struct queue_row {
        std::uint64_t seq = 0;
        milliseconds ttl{0};
        int listener = 0;
        real_time expires{0};
    };

    // The first live queued token, its listener alive, queued before `token` (or at all).
    std::optional<std::string> first_waiter_before(const std::string& token, real_time now) const;

    std::uint64_t sequence_ = 0;
    std::optional<lock_row> row_;
    std::map<std::string, queue_row> queue_;  // by token
    std::set<int> listeners_;
};

}  // namespace dlock::sim
