// SPDX-License-Identifier: BSL-1.0
// One read at a time of a name a watch says changed (a latch's wait, an election's
// observer), sans-io: an event during a read asks for one more; the watch is made after the
// first good read, and its `ready` reads again, so nothing between the two reads is missed.
#pragma once

#include <utility>

namespace dlock::detail {

class read_cycle {
public:
    /// `watch`: make the watch after the first good read (false: one read only).
    explicit read_cycle(bool watch = true) noexcept : watch_later_(watch) {}

    /// A read is wanted. True: start it now; false: one runs, and another follows it.
    [[nodiscard]] bool want() noexcept
    {
        if (reading_) {
            again_ = true;
            return false;
        }
        reading_ = true;
        return true;
    }
    /// The read's reply came (whatever it says).
    void replied() noexcept { reading_ = false; }

    enum class next : unsigned char {
        watch,  ///< the first good read: watch the name now (its `ready` reads again)
        read,   ///< an event came during the read: read again
        none,
    };
    /// After a good read: what the caller does next.
    next after_good_read() noexcept
    {
        if (std::exchange(watch_later_, false))
            return next::watch;
        return std::exchange(again_, false) ? next::read : next::none;
    }
    /// The watch is still to be made (the first good read has not come).
    bool watch_pending() const noexcept { return watch_later_; }

private:
    bool reading_ = false, again_ = false, watch_later_ = true;
};

}  // namespace dlock::detail
