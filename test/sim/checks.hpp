// SPDX-License-Identifier: BSL-1.0
// What every schedule must keep, checked as it runs: a fenced resource that takes each
// holder's writes (a write older than one already taken is a stale write: two holders both
// believed their lease valid), no lost update of a counter holders read and write back,
// fencing tokens increasing in grant order, every waiter served
// within a bound once the faults stop, and nothing left at the server when everyone has gone.
#pragma once

#include "world.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace dlock::sim {

class checks {
public:
    explicit checks(world& w) : w_(w) {}

    /// A holder writes to the fenced resource while it believes its lease valid.
    void write(const std::string& who, std::uint64_t fence)
    {
        if (fence < max_written_)
            violation("exclusion: " + who + " wrote with fence " + std::to_string(fence) + " after fence " +
                      std::to_string(max_written_) + " had written (both believed their lease valid)");
        max_written_ = std::max(max_written_, fence);
        ++writes_;
    }
    /// A lease granted by the store to `incarnation` (a local hand-off keeps its fence).
    void grant(const std::string& incarnation, std::uint64_t fence)
    {
        if (fence < last_fence_ || (fence == last_fence_ && incarnation != last_holder_))
            violation("fencing: " + incarnation + " was granted fence " + std::to_string(fence) + " after " +
                      last_holder_ + " had " + std::to_string(last_fence_));
        last_fence_ = fence;
        last_holder_ = incarnation;
        ++grants_;
    }
    /// A shared lease granted (a reader's, a permit's): counted, its fence not ordered.
    void shared_grant() { ++grants_; }
    /// A holder reads the shared counter when granted, and writes back one more when it ends
    /// its hold while it still believes its lease valid: an increment made in between by
    /// someone else would be lost.
    std::uint64_t read_counter() const noexcept { return counter_; }
    void write_counter(const std::string& who, std::uint64_t read)
    {
        if (counter_ != read)
            violation("lost update: " + who + " read the counter at " + std::to_string(read) +
                      " and wrote it back over " + std::to_string(counter_));
        counter_ = read + 1;
    }
    void violation(const std::string& what)
    {
        w_.log("VIOLATION " + what);
        if (violations_.empty())
            first_ = what;
        violations_.push_back(what);
    }

    bool ok() const noexcept { return violations_.empty(); }
    const std::string& first() const noexcept { return first_; }
    std::uint64_t grants() const noexcept { return grants_; }
    std::uint64_t writes() const noexcept { return writes_; }

private:
    world& w_;
    std::uint64_t max_written_ = 0, last_fence_ = 0, grants_ = 0, writes_ = 0, counter_ = 0;
    std::string last_holder_, first_;
    std::vector<std::string> violations_;
};

}  // namespace dlock::sim
