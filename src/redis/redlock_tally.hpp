// SPDX-License-Identifier: BSL-1.0
// Redlock's majority vote over N independent nodes, as a pure function of the replies so
// far: every phase (grant, raise, renew, release) decides with it.
#pragma once

#include <cstddef>

namespace dlock::redis {

/// `no_quorum` when neither side can reach its majority any more because too many nodes
/// failed: the answer is unknown, not "no".
enum class vote {
    pending,
    yes,
    no,
    no_quorum
};

/// `yes` and `no` are definite answers, `outstanding` replies still to come; the rest of
/// the `n` nodes failed (an error, a timeout).
constexpr vote tally(std::size_t n, std::size_t yes, std::size_t no, std::size_t outstanding) noexcept
{
    const std::size_t q = n / 2 + 1;
    if (yes >= q)
        return vote::yes;
    if (no > n - q)  // yes can no longer reach q on definite answers alone
        return vote::no;
    if (yes + outstanding < q && no + outstanding <= n - q)
        return vote::no_quorum;
    return vote::pending;
}

}  // namespace dlock::redis
