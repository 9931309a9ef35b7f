// SPDX-License-Identifier: BSL-1.0
#include "core/lease_set.hpp"

#include <dlock/error.hpp>

#include <algorithm>

namespace dlock::detail {

using boost::system::error_code;
using std::chrono::duration_cast;

lease_set::lease_set(lease_kind first, unsigned capacity)
    : what_(first == lease_kind::permit ? lease_kind::permit : lease_kind::read),
      capacity_(first == lease_kind::permit ? capacity : 0)
{
}

error_code lease_set::check(const lease_request& req) const
{
    bool permit = req.kind == lease_kind::permit;
    if (permit != (what_ == lease_kind::permit) || (permit && req.capacity != capacity_))
        return error::kind_mismatch;
    return {};
}

void lease_set::purge(time_point now)
{
    std::erase_if(holders_, [now](auto& h) { return h.second.expires <= now; });
}

bool lease_set::has_writer() const
{
    return std::any_of(holders_.begin(), holders_.end(), [](auto& h) { return h.second.kind == lease_kind::write; });
}

bool lease_set::admits(lease_kind k) const
{
    switch (k) {
    case lease_kind::permit: return holders_.size() < capacity_;
    case lease_kind::read: return !has_writer();
    default: return holders_.empty();
    }
}

std::uint64_t lease_set::take(const std::string& token, lease_kind k, milliseconds ttl, time_point now,
                              std::uint64_t& fence)
{
    holders_[token] = holder{++fence, now + ttl, k};
    return fence;
}

std::uint64_t lease_set::serve(const std::string& me, time_point now, std::uint64_t& fence, const live_fn& live,
                               const grant_fn& grant)
{
    std::uint64_t mine = 0;
    while (!queue_.empty()) {
        auto w = queue_.front();
        if (w.token != me && !live(w.token)) {
            queue_.pop_front();  // its process is gone
            continue;
        }
        if (holders_.count(w.token)) {
            queue_.pop_front();
            continue;
        }
        if (!admits(w.kind))
            break;  // first come, first served: nobody behind it overtakes
        queue_.pop_front();
        auto f = take(w.token, w.kind, w.ttl, now, fence);
        if (w.token == me)
            mine = f;
        else
            grant(w.token, grant_notice{f, w.ttl, {}});
    }
    return mine;
}

acquire_result lease_set::acquire(const lease_request& req, time_point now, std::uint64_t& fence, const live_fn& live,
                                  const grant_fn& grant)
{
    purge(now);
    acquire_result r;
    auto withdraw = [&] { std::erase_if(queue_, [&](auto& w) { return w.token == req.token; }); };
    if (auto it = holders_.find(req.token); it != holders_.end()) {
        it->second.expires = now + req.ttl;
        withdraw();
        return {true, it->second.fence, req.ttl};
    }
    if (auto f = serve(req.token, now, fence, live, grant))
        return {true, f, req.ttl};
    if (queue_.empty() && admits(req.kind))
        return {true, take(req.token, req.kind, req.ttl, now, fence), req.ttl};
    last_refusal_ = now;
    // The soonest end among the holders: a lease then frees, or is renewed.
    auto soonest = std::min_element(holders_.begin(), holders_.end(),
                                    [](auto& a, auto& b) { return a.second.expires < b.second.expires; });
    if (soonest != holders_.end())
        r.holder_ttl = duration_cast<milliseconds>(soonest->second.expires - now);
    if (req.queue && std::none_of(queue_.begin(), queue_.end(), [&](auto& w) { return w.token == req.token; }))
        queue_.push_back({req.token, req.ttl, req.kind});
    return r;
}

renew_result lease_set::renew(const std::string& token, milliseconds ttl, time_point now)
{
    purge(now);
    auto it = holders_.find(token);
    if (it == holders_.end())
        return {};
    it->second.expires = now + ttl;
    return {true, !queue_.empty() || (last_refusal_ != time_point{} && now - last_refusal_ < ttl)};
}

bool lease_set::release(const std::string& token, time_point now, std::uint64_t& fence, const live_fn& live,
                        const grant_fn& grant, bool& wake)
{
    purge(now);
    wake = false;
    auto it = holders_.find(token);
    if (it == holders_.end()) {
        std::erase_if(queue_, [&](auto& w) { return w.token == token; });
        return false;
    }
    holders_.erase(it);
    serve({}, now, fence, live, grant);
    wake = queue_.empty();
    return true;
}

bool lease_set::force_release(lease_kind side, time_point now, std::uint64_t& fence, const live_fn& live,
                              const grant_fn& grant)
{
    purge(now);
    bool one_side = side == lease_kind::read || side == lease_kind::write;
    auto n = std::erase_if(holders_, [&](auto& h) { return !one_side || h.second.kind == side; });
    serve({}, now, fence, live, grant);
    return n > 0;
}

lock_status lease_set::status(time_point now)
{
    purge(now);
    lock_status st;
    st.kind = what_;
    st.capacity = capacity_;
    st.holders = holders_.size();
    st.held = !holders_.empty();
    st.queued = queue_.size();
    for (auto& [token, h] : holders_) {
        auto left = duration_cast<milliseconds>(h.expires - now);
        if (h.kind == lease_kind::write)
            st.writer = true;
        if (h.fence > st.fencing_token) {
            st.fencing_token = h.fence;
            st.holder = token;
        }
        st.ttl = std::max(st.ttl, left);
    }
    return st;
}

bool lease_set::empty(time_point now)
{
    purge(now);
    return holders_.empty() && queue_.empty();
}

}  // namespace dlock::detail
