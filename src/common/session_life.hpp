// SPDX-License-Identifier: BSL-1.0
// The life of a store session whose leases all live by it (an etcd lease, a ZooKeeper
// session), without I/O: which session event each input makes, when the next keep-alive is
// due and when the session must be taken as lost here. The deadline is dated from the send
// time of the last confirmation (a reply proves the session lived when the request left),
// less a drift of 1% + 2 ms, as the registry's leases are. Used by the etcd and ZooKeeper
// stores, which send, arm their timers from next_keepalive() and deadline(), and pass on
// the events; tested alone with a fake clock (test/unit/common/session_life_test.cpp).
//
//   state \ input   opened   keepalive_sent  confirmed   heard      unconfirmed  reconnected  expired?  end
//   none            up       -               -           -          -            -            false     -
//   up              (again)  next=now+every  up          deadline   suspect      -            by clock  lost
//   suspect         (again)  next=now+every  restored    deadline   - (retry)    restored     by clock  lost
#pragma once

#include <dlock/store.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>

namespace dlock::detail {

class session_life {
public:
    using clock_type = std::chrono::steady_clock;
    using time_point = clock_type::time_point;
    using milliseconds = std::chrono::milliseconds;

    /// The keep-alive period, and the pause before asking again after one went unanswered.
    struct schedule {
        milliseconds every{0};
        milliseconds retry{0};
    };

    /// A session was made (a grant, a handshake), confirmed by a request sent at `sent`.
    session_event opened(std::uint64_t id, time_point sent, milliseconds ttl, schedule s)
    {
        id_ = id;
        ttl_ = ttl;
        schedule_ = s;
        raw_deadline_ = sent + ttl;
        next_keepalive_ = sent + s.every;
        suspect_ = false;
        return session_event::up;
    }

    /// A keep-alive left now: the next one is due a period later, answered or not.
    void keepalive_sent(time_point now)
    {
        if (id_)
            next_keepalive_ = now + schedule_.every;
    }

    /// A keep-alive sent at `sent` was answered, the session (server side) good for `ttl`
    /// from then: the deadline moves (never back), a suspicion ends.
    std::optional<session_event> confirmed(time_point sent, std::optional<milliseconds> ttl = std::nullopt)
    {
        if (!id_)
            return std::nullopt;
        raw_deadline_ = std::max(raw_deadline_, sent + ttl.value_or(ttl_));
        next_keepalive_ = sent + schedule_.every;
        return std::exchange(suspect_, false) ? session_event::restored : session_event::up;
    }

    /// Some other request sent at `sent` was answered: the deadline moves, quietly.
    void heard(time_point sent)
    {
        if (id_)
            raw_deadline_ = std::max(raw_deadline_, sent + ttl_);
    }

    /// A keep-alive failed, or the connection went: suspect (said once), asked again soon.
    std::optional<session_event> unconfirmed(time_point now)
    {
        if (!id_)
            return std::nullopt;
        next_keepalive_ = now + schedule_.retry;
        return std::exchange(suspect_, true) ? std::nullopt : std::optional(session_event::suspect);
    }

    /// The connection is back and the servers took the session again (no deadline moves).
    std::optional<session_event> reconnected()
    {
        if (!id_ || !suspect_)
            return std::nullopt;
        suspect_ = false;
        return session_event::restored;
    }

    /// No confirmation reached the deadline: the session must be taken as lost here.
    bool expired(time_point now) const noexcept { return id_ && now >= deadline(); }

    /// The session ended (expired at the servers, expired here, closed): what it was.
    session_info end()
    {
        auto old = info();
        id_ = 0;
        suspect_ = false;
        return old;
    }

    std::uint64_t id() const noexcept { return id_; }
    bool suspect() const noexcept { return suspect_; }
    milliseconds ttl() const noexcept { return ttl_; }
    milliseconds drift() const noexcept { return ttl_ / 100 + milliseconds(2); }
    time_point deadline() const noexcept { return raw_deadline_ - drift(); }
    /// The servers' view: the last confirmation's send time + ttl, no drift taken off.
    time_point raw_deadline() const noexcept { return raw_deadline_; }
    time_point next_keepalive() const noexcept { return next_keepalive_; }
    session_info info() const noexcept { return {id_, id_ ? deadline() : time_point{}, ttl_}; }

private:
    std::uint64_t id_ = 0;  // 0: no session
    milliseconds ttl_{0};
    schedule schedule_{};
    time_point raw_deadline_{}, next_keepalive_{};
    bool suspect_ = false;
};

/// The whole milliseconds from `from` to `t`, never fewer than none (a lease's time left).
inline std::chrono::milliseconds ms_until(session_life::time_point t, session_life::time_point from)
{
    return std::max(std::chrono::milliseconds(0), std::chrono::duration_cast<std::chrono::milliseconds>(t - from));
}

}  // namespace dlock::detail
