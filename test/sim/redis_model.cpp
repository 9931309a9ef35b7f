// SPDX-License-Identifier: BSL-1.0
#include "redis_model.hpp"

#include <algorithm>

namespace dlock::sim {

namespace {

template <class T>
void erase_value(std::vector<T>& v, const T& x)
{
    v.erase(std::remove(v.begin(), v.end(), x), v.end());
}

}  // namespace

void redis_model::purge_queue(real_time now)
{
    if (now >= queue_expires_) {
        queue_.clear();
        queue_ttl_.clear();
    }
}

void redis_model::serve_as_set(lease_kind kind, unsigned permits)
{
    set_.emplace(kind, permits);
    permits_ = kind == lease_kind::permit ? permits : 1;
}

acquire_result redis_model::set_acquire(const std::string& token, milliseconds ttl, bool queue, real_time now,
                                        lease_kind kind)
{
    lease_request req{"x", token, ttl, kind, permits_, queue};
    auto r = set_->acquire(
        req, set_clock(now), counter_, [this](const std::string& t) { return !grants_[t].empty(); },
        [this](const std::string& t, const grant_notice& g) {
            if (on_grant)
                on_grant(t, g.fencing_token, g.ttl);
        });
    tidy_set(now);
    return r;
}

// A set that holds nothing and queues nobody is forgotten, the time of its last refusal
// with it: the scripts delete its keys then (keep()), as memory_store forgets it.
void redis_model::tidy_set(real_time now)
{
    if (set_->empty(set_clock(now)))
        set_.emplace(set_->kind(), set_->capacity());
}

bool redis_model::set_release(const std::string& token, real_time now)
{
    bool wake = false;
    bool owned = set_->release(
        token, set_clock(now), counter_, [this](const std::string& t) { return !grants_[t].empty(); },
        [this](const std::string& t, const grant_notice& g) {
            if (on_grant)
                on_grant(t, g.fencing_token, g.ttl);
        },
        wake);
    tidy_set(now);
    // The release channel is told once nobody queued is left (the waiters that did not queue).
    if (owned && wake && on_publish)
        on_publish();
    return owned;
}

acquire_result redis_model::acquire(const std::string& token, milliseconds ttl, bool queue, real_time now,
                                    lease_kind kind)
{
    if (set_)
        return set_acquire(token, ttl, queue, now, kind);
    purge_queue(now);
    acquire_result r;
    if (handoff_ && !live(now))
        hand_on_free(token, now);
    if (live(now) && row_->owner != token) {
        auto pttl = row_->expires ? std::chrono::duration_cast<milliseconds>(*row_->expires - now) : milliseconds(-1);
        r.holder_ttl = pttl;
        row_->contended = true;
        if (!queue)
            return r;
        row_->queued = true;
        if (!queue_ttl_.count(token))
            queue_.push_back(token);
        queue_ttl_[token] = ttl;
        // The queue lives one waiter lease past the holder's, only ever extended.
        queue_expires_ = std::max(queue_expires_, now + std::max(pttl, milliseconds(0)) + ttl);
        return r;
    }
    if (!live(now)) {
        if (on_barge)  // queue_ is in queueing order: any listened-for token before ours
            for (const auto& t : queue_) {
                if (t == token)
                    break;
                if (!grants_[t].empty()) {
                    on_barge(token, t);
                    break;
                }
            }
        row_ = lock_row{token, ++counter_, std::nullopt};
        if (queue && queue_ttl_.erase(token))
            erase_value(queue_, token);
    }
    if (!faults_.setnx_then_expire || row_->expires)
        row_->expires = now + ttl;
    r.acquired = true;
    r.fencing_token = row_->fence;
    r.granted_ttl = ttl;
    return r;
}

// A free name and waiters queued before `token`: the first listened-for one is handed it.
void redis_model::hand_on_free(const std::string& token, real_time now)
{
    while (!queue_.empty() && queue_.front() != token) {
        auto w = queue_.front();
        queue_.erase(queue_.begin());
        auto ttl = queue_ttl_[w];
        queue_ttl_.erase(w);
        if (grants_[w].empty())
            continue;  // a dead waiter: nobody listens on its grant channel
        auto fence = ++counter_;
        row_ = lock_row{w, fence, now + ttl, false, !queue_.empty()};
        if (on_grant)
            on_grant(w, fence, ttl);
        return;
    }
}

void redis_model::expire(const std::string& token, milliseconds ttl, real_time now)
{
    if (row_ && row_->owner == token && !row_->expires)
        row_->expires = now + ttl;
}

renew_result redis_model::renew(const std::string& token, milliseconds ttl, real_time now)
{
    if (set_)
        return set_->renew(token, ttl, set_clock(now));
    if (!live(now) || row_->owner != token)
        return {};
    row_->expires = now + ttl;
    return {true, std::exchange(row_->contended, false)};
}

bool redis_model::release(const std::string& token, real_time now)
{
    if (set_)
        return set_release(token, now);
    purge_queue(now);
    if (!live(now) || (row_->owner != token && !faults_.release_without_owner_check)) {
        if (queue_ttl_.erase(token))
            erase_value(queue_, token);
        return false;
    }
    if (row_->queued) {
        while (!queue_.empty()) {
            auto w = queue_.front();
            queue_.erase(queue_.begin());
            auto ttl = queue_ttl_[w];
            queue_ttl_.erase(w);
            if (w == row_->owner || grants_[w].empty())
                continue;  // a dead waiter: nobody listens on its grant channel
            auto fence = faults_.handoff_reuses_fence ? row_->fence : ++counter_;
            bool more = !queue_.empty();
            row_ = lock_row{w, fence, now + ttl, more, more};
            if (on_grant)
                on_grant(w, fence, ttl);
            return true;
        }
    }
    row_.reset();
    if (on_publish)
        on_publish();
    return true;
}

void redis_model::unsubscribe_all(int conn)
{
    subscribers_.erase(conn);
    for (auto& [token, conns] : grants_)
        conns.erase(conn);
}

std::string redis_model::leftovers(real_time now)
{
    purge_queue(now);
    if (!subscribers_.empty())
        return "a subscription to the release channel";
    for (auto& [token, conns] : grants_)
        if (!conns.empty())
            return "a subscription to " + token + "'s grant channel";
    if (!queue_.empty())
        return "the queued token " + queue_.front();
    return {};
}

void redis_model::restart()
{
    if (faults_.counter_not_durable)
        counter_ = 0;
    subscribers_.clear();  // every connection is gone with the server
    grants_.clear();
}

void redis_model::restart_losing_data()
{
    restart();
    row_.reset();
    counter_ = 0;
    queue_.clear();
    queue_ttl_.clear();
}

bool redis_model::raise_fence(std::uint64_t fence, const std::string& token, real_time now)
{
    counter_ = std::max(counter_, fence);
    if (!live(now) || row_->owner != token)
        return false;
    row_->fence = fence;
    return true;
}

std::optional<std::string> redis_model::holder(real_time now) const
{
    if (set_) {
        auto st = set_->status(set_clock(now));
        return st.held ? std::optional<std::string>(st.holder) : std::nullopt;
    }
    if (!live(now))
        return std::nullopt;
    return row_->owner;
}

}  // namespace dlock::sim
