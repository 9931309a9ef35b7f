// SPDX-License-Identifier: BSL-1.0
// The callers that wait while a per-session store opens its session: the first one's
// wait starts the opening, the opening's outcome answers them all, in the order they came.
#pragma once

#include <boost/system/error_code.hpp>

#include <functional>
#include <utility>
#include <vector>

namespace dlock::detail {

class session_gate {
public:
    using waiter = std::function<void(boost::system::error_code)>;

    /// Waits for the session being opened. True: none was, the caller opens it now.
    [[nodiscard]] bool wait(waiter w)
    {
        waiters_.push_back(std::move(w));
        return !std::exchange(opening_, true);
    }
    /// An opening is under way.
    bool opening() const noexcept { return opening_; }
    /// The opening ended (`ec` empty: the session is up): every waiter hears it. A waiter
    /// may wait again (a new opening starts then).
    void opened(boost::system::error_code ec)
    {
        opening_ = false;
        auto w = std::move(waiters_);
        waiters_.clear();
        for (auto& f : w)
            f(ec);
    }

private:
    std::vector<waiter> waiters_;
    bool opening_ = false;
};

}  // namespace dlock::detail
