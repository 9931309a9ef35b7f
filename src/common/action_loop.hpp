// SPDX-License-Identifier: BSL-1.0
// How a driver performs a sans-io machine's actions (the request pipe's host, the queued
// wait's drive()): in order, and an input an action raises meanwhile has its actions
// performed after the batch by the same loop, never by a nested one.
#pragma once

#include <utility>
#include <vector>

namespace dlock::detail {

/// Performs `actions` (emptied) with `perform`. `performing` marks the loop running: a call
/// made while it runs returns at once, leaving what it added to the running loop.
template <class Action, class Perform>
void perform_in_order(std::vector<Action>& actions, bool& performing, Perform&& perform)
{
    if (performing)
        return;
    performing = true;
    std::vector<Action> batch;
    while (!actions.empty()) {
        batch.swap(actions);
        for (auto& a : batch)
            perform(a);
        batch.clear();
    }
    performing = false;
}

}  // namespace dlock::detail
