// SPDX-License-Identifier: BSL-1.0
// What every handle to one semaphore of a registry shares: its permit lanes.
#pragma once

#include "core/lock_driver.hpp"

#include <memory>
#include <string>
#include <vector>

namespace dlock::detail {

/// A lane is a driver on one permit lease: it holds or waits for one permit at a time and
/// hands it on to its own local waiters, as a mutex's driver does.
struct semaphore_state {
    std::shared_ptr<registry_state> reg;
    std::string name;
    unsigned permits = 1;
    bool mismatch = false;  // a handle obtained with another number of permits than the first
    std::vector<std::shared_ptr<lock_driver>> lanes;

    /// The lane for the next acquire: an unused one, else a new one while fewer lanes than
    /// permits exist, else the one with the fewest local waiters.
    lock_driver& pick();
};

}  // namespace dlock::detail
