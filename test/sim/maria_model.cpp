// SPDX-License-Identifier: BSL-1.0
#include "maria_model.hpp"

#include <algorithm>

namespace dlock::sim {

maria_model::acquire_reply maria_model::acquire(const std::string& token, milliseconds ttl, int conn, real_time now,
                                                std::optional<std::uint64_t> drawn)
{
    const bool was_live = live(now);
    if (!row_)
        row_ = lock_row{token, drawn.value_or(0), now + ttl, false, 0};
    else {
        // ON DUPLICATE KEY UPDATE assigns left to right; each right side reads the old row.
        auto& r = *row_;
        const bool mine = r.owner == token;
        r.contended = mine ? r.contended : was_live;
        r.signal_conn = mine || was_live ? r.signal_conn : 0;
        r.fence = mine || was_live ? r.fence : drawn.value_or(0);
        r.owner = was_live ? r.owner : token;
        if (r.owner == token)
            r.expires = now + ttl;
    }
    // The fence of a name newly ours, drawn while the statement holds the row.
    if (row_->owner == token && row_->fence == 0)
        row_->fence = nextval();
    take_signal(token, conn, now);
    if (w_.verbose)
        w_.log("mariadb: acquire " + token + " on " + std::to_string(conn) + ": owner " + row_->owner + ", signal " +
               std::to_string(signal_));
    acquire_reply out;
    if (row_->owner == token) {
        out.result.acquired = true;
        out.result.fencing_token = row_->fence;
        out.result.granted_ttl = ttl;
    } else {
        out.result.holder_ttl =
            row_->expires > now ? std::chrono::ceil<milliseconds>(row_->expires - now) : milliseconds(0);
    }
    out.signal = row_->signal_conn != 0 && signal_ == row_->signal_conn;
    return out;
}

renew_result maria_model::renew(const std::string& token, milliseconds ttl, int conn, real_time now)
{
    renew_result r;
    if (row_ && row_->owner == token && live(now)) {
        r.owned = true;
        r.contended = std::exchange(row_->contended, false);
        row_->expires = now + ttl;
    }
    take_signal(token, conn, now);
    reconcile(conn, now);
    return r;
}

bool maria_model::release(const std::string& token, int conn, real_time now)
{
    bool held = false;
    if (row_ && row_->owner == token) {
        held = live(now);
        row_.reset();
    }
    reconcile(conn, now);
    if (w_.verbose)
        w_.log("mariadb: release " + token + " on " + std::to_string(conn) + ": signal " + std::to_string(signal_));
    return held;
}

// Ours and live: the signal lock is this connection's already, or free (GET_LOCK(.., 0)).
void maria_model::take_signal(const std::string& token, int conn, real_time now)
{
    if (!row_ || row_->owner != token || !live(now) || (signal_ != conn && signal_ != 0) || closed_.count(conn))
        return;
    signal_ = conn;
    row_->signal_conn = conn;
}

// The connection gives the signal lock back unless a live lease of ours still names it.
void maria_model::reconcile(int conn, real_time now)
{
    if (signal_ == conn && !(row_ && row_->signal_conn == conn && live(now)))
        give_back();
}

void maria_model::give_back()
{
    signal_ = 0;
    // Each blocked GET_LOCK has it in turn and gives it back at once: every one of them wakes.
    auto woken = std::exchange(blocked_, {});
    for (auto& b : woken)
        b.done(wait_end::had);
}

void maria_model::wait(int wait_conn, real_time timeout, std::function<void(wait_end)> done)
{
    if (signal_ == 0)
        return done(wait_end::had);
    auto id = ++next_wait_;
    blocked_.push_back({wait_conn, id, std::move(done)});
    w_.after(timeout, [this, id] {
        auto it = std::find_if(blocked_.begin(), blocked_.end(), [id](const blocked& b) { return b.id == id; });
        if (it == blocked_.end())
            return;
        auto done = std::move(it->done);
        blocked_.erase(it);
        done(wait_end::timed_out);
    });
}

void maria_model::abort_wait(int wait_conn)
{
    auto it = std::find_if(blocked_.begin(), blocked_.end(), [&](const blocked& b) { return b.conn == wait_conn; });
    if (it == blocked_.end())
        return;
    auto done = std::move(it->done);
    blocked_.erase(it);
    done(wait_end::aborted);
}

void maria_model::connection_closed(int conn)
{
    closed_.insert(conn);
    if (signal_ == conn)
        give_back();
    // Its wait connections share its network path here: they end with it, unanswered.
    std::erase_if(blocked_, [&](const blocked& b) { return owner_of(b.conn) == conn; });
}

std::optional<std::string> maria_model::holder(real_time now) const
{
    if (live(now))
        return row_->owner;
    return std::nullopt;
}

std::string maria_model::leftovers(real_time now) const
{
    std::string out;
    if (signal_ != 0 && !(row_ && row_->signal_conn == signal_ && live(now)))
        out += "the signal lock held by connection " + std::to_string(signal_) + " with no live lease; ";
    if (!blocked_.empty())
        out += std::to_string(blocked_.size()) + " GET_LOCK waits still blocked; ";
    return out;
}

}  // namespace dlock::sim
