// SPDX-License-Identifier: BSL-1.0
// "A release never overtakes its token's acquire" (store.hpp), for stores whose requests
// may pass each other (several connections, or an acquire that first waits for a session):
// the acquires in flight per (name, token), and what waits for the last of them to end.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace dlock::detail {

class token_order {
public:
    using key = std::pair<std::string, std::string>;  // (name, token)

    /// An acquire of `k` starts.
    void begin(const key& k) { ++in_flight_[k]; }
    /// An acquire of `k` is in flight.
    bool busy(const key& k) const { return in_flight_.count(k) != 0; }
    /// Runs `f` once no acquire of `k` is in flight: now if none is, else at the last end().
    void after(const key& k, std::function<void()> f)
    {
        if (!busy(k))
            return f();
        waiting_[k].push_back(std::move(f));
    }
    /// An acquire of `k` ended. Returns what waited for the last one, to be run by the
    /// caller now (after it completed the acquire, so a release follows it).
    std::vector<std::function<void()>> end(const key& k)
    {
        auto it = in_flight_.find(k);
        if (it == in_flight_.end() || --it->second > 0)
            return {};
        in_flight_.erase(it);
        auto w = waiting_.find(k);
        if (w == waiting_.end())
            return {};
        auto run = std::move(w->second);
        waiting_.erase(w);
        return run;
    }

private:
    std::map<key, int> in_flight_;
    std::map<key, std::vector<std::function<void()>>> waiting_;
};

}  // namespace dlock::detail
