// SPDX-License-Identifier: BSL-1.0
// What the ZooKeeper store does after one round of a semaphore's lease phase, without I/O.
// The round runs while our node is first under `locks` (the semaphore's internal mutex,
// taken by an ordinary acquire round): a lease node's create, the children of `leases` and
// the children of the name's path, sent back to back. judge() names the next step; the store
// carries it out (src/zookeeper/permit.cpp). Cases: test/unit/zookeeper/permit_round_test.cpp.
#pragma once

#include "zookeeper/acquire_round.hpp"
#include "zookeeper/semaphore_layout.hpp"

namespace dlock::zookeeper {

struct permit_round {
    bool closed = false;
    bool same_session = true;
    bool retried = false;
    bool parents_made = false;  ///< `leases` was made for this round
    bool queue = false;         ///< a queued acquire: it waits for a lease to go
    unsigned permits = 1;
    reply create = reply::not_sent;  ///< not_sent: our lease node was known
    reply leases = reply::ok;        ///< the children of `leases`
    reply path = reply::ok;          ///< the children of the name's path
    bool czxid_known = false;        ///< our lease node's czxid is known
    bool foreign = false;            ///< a mutex's, read-write lock's or election's node is under the name
    semaphore_layout::lease_count count{};
};

enum class permit_next : std::uint8_t {
    fail_closed,
    start_over,             ///< the session went: once more in a new one
    fail_session_lost,      ///< the session went again
    make_parents,           ///< no `leases` yet: make it, then the round again
    fail_create_uncertain,  ///< the create may have run: remember that (the guid finds it), fail
    fail_create,
    fail_children,
    mismatch,     ///< another kind, or a semaphore of other permits: withdraw, kind_mismatch
    gone,         ///< our lease node is gone (a forced release): withdraw, not acquired
    check_owner,  ///< found by its guid only: its czxid, if this session owns it, then again
    granted,      ///< a permit: leave `locks` and hold
    wait,         ///< every permit taken, queued: keep both nodes, wait for a lease to go
    withdraw,     ///< every permit taken, a try: delete both nodes, not acquired
};

/// The next step, checks in the order of acquire_round's judge(): the store and session,
/// the create, the reads, then what they say.
inline permit_next judge(const permit_round& r) noexcept
{
    if (r.closed)
        return permit_next::fail_closed;
    if (!r.same_session)
        return r.retried ? permit_next::fail_session_lost : permit_next::start_over;
    if (r.create == reply::no_node && !r.parents_made)
        return permit_next::make_parents;
    if (r.create == reply::lost)
        return permit_next::fail_create_uncertain;
    if (r.create != reply::ok && r.create != reply::not_sent)
        return permit_next::fail_create;
    if (r.leases != reply::ok || r.path != reply::ok)
        return permit_next::fail_children;
    if (r.foreign || r.count.other_permits)
        return permit_next::mismatch;
    if (!r.count.found)
        return permit_next::gone;
    if (!r.czxid_known)
        return permit_next::check_owner;
    if (r.count.count <= r.permits)
        return permit_next::granted;
    return r.queue ? permit_next::wait : permit_next::withdraw;
}

}  // namespace dlock::zookeeper
