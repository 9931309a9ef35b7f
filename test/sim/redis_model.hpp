// SPDX-License-Identifier: BSL-1.0
// One Redis node as dlock's mutex scripts use it (src/redis/redis_scripts.hpp): a lock hash
// {owner, fence, contended, queued} with a PTTL, the fencing counter, the direct hand-off's
// queue of tokens with their leases (expiring one waiter lease after the holder's), the
// name's release channel and each waiter's grant channel. Small on purpose: each operation
// is one script's effect, applied at the server's time. The broken variants are the classic
// mistakes the checks must catch. A read-write lock's or a semaphore's name is a set of
// leases instead (src/redis/set_scripts.hpp), which those scripts run step by step as
// core/lease_set lays it out: the model runs that protocol itself.
#pragma once

#include <dlock/store.hpp>

#include "core/lease_set.hpp"
#include "world.hpp"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace dlock::sim {

/// Deliberately broken variants of the server's side of the recipe.
struct redis_faults {
    bool release_without_owner_check = false;  ///< DEL whatever holds the name
    bool setnx_then_expire = false;            ///< the lease's expiry set by a second request
    bool counter_not_durable = false;          ///< a restart loses the fencing counter
    bool handoff_reuses_fence = false;         ///< a hand-off gives the waiter the holder's fence
};

class redis_model {
public:
    /// `handoff`: redis_store's direct hand-off (its attempts pass the queue to the scripts).
    explicit redis_model(redis_faults f = {}, bool handoff = true) : faults_(f), handoff_(handoff) {}

    /// The acquire script: ours if free (or expired) or already ours; else the holder's PTTL,
    /// and with `queue` the token queued for a hand-off. With the hand-off, a free name goes
    /// first to the first listened-for token queued before ours (the caller is then refused
    /// behind it). With setnx_then_expire the lock has no expiry until expire() comes.
    acquire_result acquire(const std::string& token, milliseconds ttl, bool queue, real_time now,
                           lease_kind kind = lease_kind::mutex);
    /// From now on the name is a read-write lock (`kind` read) or a semaphore of `permits`:
    /// the set scripts' protocol, a waiter live while its grant channel has a subscriber, a
    /// grant published on it, the release channel told when nobody queued is left.
    void serve_as_set(lease_kind kind, unsigned permits);
    /// The second request of the broken two-step acquire.
    void expire(const std::string& token, milliseconds ttl, real_time now);
    renew_result renew(const std::string& token, milliseconds ttl, real_time now);
    /// The release script: only the owner's (unless broken), handed to the first queued token
    /// whose grant channel has a subscriber, else freed with a publish on the channel; a
    /// token that does not hold is withdrawn from the queue.
    bool release(const std::string& token, real_time now);
    /// A restart with the data kept (AOF): only a broken counter is lost.
    void restart();
    /// A restart that loses the data (no AOF, or its last second): the lock and the counter.
    void restart_losing_data();
    /// Redlock's counter update (scripts::raise_fence): the counter raised to at least
    /// `fence`, and if `token` holds here, `fence` recorded as its lease's. True if it holds.
    bool raise_fence(std::uint64_t fence, const std::string& token, real_time now);

    /// The connections subscribed to the name's release channel, and `token`'s grant channel.
    std::set<int>& subscribers() noexcept { return subscribers_; }
    std::set<int>& grant_subscribers(const std::string& token) { return grants_[token]; }
    /// Every subscription of `conn` (its connection went).
    void unsubscribe_all(int conn);
    /// Anything subscribed, or a queued token whose entry has not expired.
    std::string leftovers(real_time now);
    /// The fencing counter's value.
    std::uint64_t counter() const noexcept { return counter_; }
    /// A set's status at `now` (holders, writer, highest fence, queued), as the status script's.
    lock_status set_status(real_time now) const { return set_->status(set_clock(now)); }
    /// Who holds the name at `now` (expired leases do not hold).
    std::optional<std::string> holder(real_time now) const;
    /// Called for each publish on the release channel, and on a grant channel.
    std::function<void()> on_publish;
    std::function<void(const std::string& token, std::uint64_t fence, milliseconds ttl)> on_grant;
    /// Called when an acquire takes the name while `waiter`, queued before `taker` (or at
    /// all, if `taker` was not queued), is still queued and listened for: FIFO broken.
    std::function<void(const std::string& taker, const std::string& waiter)> on_barge;

private:
    struct lock_row {
        std::string owner;
        std::uint64_t fence = 0;
        std::optional<real_time> expires;  // none: no expiry (the broken two-step acquire)
        bool contended = false, queued = false;
    };
    void purge_queue(real_time now);
    void hand_on_free(const std::string& token, real_time now);
    bool live(real_time now) const { return row_ && (!row_->expires || *row_->expires > now); }
    // The set's protocol and its clock (a time point no refusal can be confused with "never").
    acquire_result set_acquire(const std::string& token, milliseconds ttl, bool queue, real_time now, lease_kind kind);
    bool set_release(const std::string& token, real_time now);
    void tidy_set(real_time now);
    static detail::lease_set::time_point set_clock(real_time now)
    {
        return detail::lease_set::time_point(std::chrono::hours(1) +
                                             std::chrono::duration_cast<detail::lease_set::time_point::duration>(now));
    }

    redis_faults faults_;
    bool handoff_;
    std::optional<lock_row> row_;
    std::uint64_t counter_ = 0;
    std::set<int> subscribers_;
    std::map<std::string, std::set<int>> grants_;
    std::vector<std::string> queue_;
    std::map<std::string, milliseconds> queue_ttl_;  // the queue_'s tokens, with their leases
    real_time queue_expires_{0};
    mutable std::optional<detail::lease_set> set_;  // a read-write lock's or a semaphore's name
    unsigned permits_ = 1;
};

}  // namespace dlock::sim
