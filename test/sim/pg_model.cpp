// SPDX-License-Identifier: BSL-1.0
#include "pg_model.hpp"

#include <algorithm>

namespace dlock::sim {

namespace {

// The lease's remaining milliseconds, rounded up, never negative (the statements' `rem`).
milliseconds remaining(real_time expires, real_time now)
{
    if (expires <= now)
        return milliseconds(0);
    return std::chrono::ceil<milliseconds>(expires - now);
}

}  // namespace

acquire_result pg_model::acquire(const std::string& token, milliseconds ttl, int listener, real_time now,
                                 std::optional<std::uint64_t> drawn)
{
    // The fence is drawn whatever the row turns out to be.
    const auto fence = drawn ? *drawn : nextval();
    acquire_result r;
    bool ours = true;
    if (row_ && row_->owner == token)
        row_->expires = now + ttl;  // ours already (a retry, even past its end): its fence kept
    else if (!row_ || row_->expires <= now) {
        if (auto next = first_waiter_before(token, now)) {
            // A holder's lease ran out with waiters queued before us: the first is handed it.
            auto w = *next;
            auto wttl = queue_[w].ttl;
            queue_.erase(w);
            row_ = lock_row{w, fence, now + wttl, true};
            if (on_grant)
                on_grant(w, fence, wttl);
            ours = false;
        } else {
            row_ = lock_row{token, fence, now + ttl, false};
        }
        if (on_barge && row_->owner == token)  // FIFO: nobody live was queued before us
            if (auto before = first_waiter_before(token, now))
                on_barge(token, *before);
    } else {
        row_->contended = true;
        ours = false;
    }
    if (ours) {
        queue_.erase(token);
        r.acquired = true;
        r.fencing_token = row_->fence;
        r.granted_ttl = ttl;
        return r;
    }
    const auto rem = remaining(row_->expires, now);
    r.holder_ttl = rem;
    if (listener > 0) {
        // INSERT .. SELECT nextval(): drawn for the proposed row even when it conflicts.
        auto seq = nextval();
        auto until = now + rem + ttl;
        auto [it, fresh] = queue_.try_emplace(token, queue_row{seq, ttl, listener, until});
        if (!fresh) {
            it->second.ttl = ttl;
            it->second.listener = listener;
            it->second.expires = std::max(it->second.expires, until);
        }
    }
    return r;
}

std::optional<std::string> pg_model::first_waiter_before(const std::string& token, real_time now) const
{
    auto mine = queue_.find(token);
    const queue_row* best = nullptr;
    std::optional<std::string> out;
    for (const auto& [t, q] : queue_)
        if (t != token && q.expires > now && listeners_.count(q.listener) &&
            (mine == queue_.end() || q.seq < mine->second.seq) && (!best || q.seq < best->seq))
            best = &q, out = t;
    return out;
}

renew_result pg_model::renew(const std::string& token, milliseconds ttl, real_time now)
{
    renew_result r;
    if (!row_ || row_->owner != token || row_->expires <= now)
        return r;
    row_->expires = now + ttl;
    r.owned = true;
    r.contended = std::exchange(row_->contended, false);
    return r;
}

pg_model::release_outcome pg_model::release(const std::string& token, real_time now, bool force)
{
    release_outcome out;
    const bool cur = row_ && (force || row_->owner == token);
    out.held = cur && row_->expires > now;
    auto alive = [&](const queue_row& q) { return listeners_.count(q.listener) != 0; };
    // The first live queued token (by its place) whose backend still listens.
    std::optional<std::string> next;
    milliseconds next_ttl{0};
    if (cur) {
        const queue_row* best = nullptr;
        for (const auto& [t, q] : queue_)
            if (t != row_->owner && q.expires > now && alive(q) && (!best || q.seq < best->seq))
                best = &q, next = t, next_ttl = q.ttl;
    }
    // The hand-off's contended flag reads the queue as it was before this statement's delete.
    bool others = false;
    if (next)
        for (const auto& [t, q] : queue_)
            others = others || (t != *next && q.expires > now);
    std::erase_if(queue_, [&](const auto& e) {
        const auto& [t, q] = e;
        return (!force && t == token) || (next && t == *next) || q.expires <= now || !alive(q);
    });
    if (next) {
        row_->owner = *next;
        row_->fence = nextval();
        row_->contended = others;
        row_->expires = now + next_ttl;  // the waiter's lease, kept in its queue row
        if (on_grant)
            on_grant(*next, row_->fence, next_ttl);
    } else if (cur) {
        row_.reset();
        if (on_release)
            on_release();
    }
    return out;
}

std::optional<std::string> pg_model::holder(real_time now) const
{
    if (row_ && row_->expires > now)
        return row_->owner;
    return std::nullopt;
}

std::size_t pg_model::queued(real_time now) const
{
    return static_cast<std::size_t>(
        std::count_if(queue_.begin(), queue_.end(), [&](const auto& e) { return e.second.expires > now; }));
}

std::string pg_model::leftovers(real_time now) const
{
    std::string out;
    for (const auto& [t, q] : queue_)
        if (q.expires > now && listeners_.count(q.listener))
            out += "queued token " + t + "; ";
    return out;
}

}  // namespace dlock::sim
