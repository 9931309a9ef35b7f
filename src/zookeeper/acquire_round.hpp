// SPDX-License-Identifier: BSL-1.0
// What the ZooKeeper store does after one acquire round (a create and a getChildren sent
// back to back, or the getChildren alone when our node is known), without I/O: the store
// gathers the replies and its state into an acquire_round, judge() names the next step, and
// the store carries it out (src/zookeeper/acquire.cpp, judge_round). Every input that can happen
// is a case of test/unit/zookeeper/acquire_round_test.cpp.
#pragma once

#include "zookeeper/recipe.hpp"

#include <cstdint>

namespace dlock::zookeeper {

/// A reply as the acquire judges it.
enum class reply : std::uint8_t {
    ok,
    not_sent,  ///< no such request this round (our node was known: no create)
    no_node,   ///< ZNONODE
    lost,      ///< connection loss or timeout: the request may have run
    failed,    ///< any other error
};

struct acquire_round {
    bool closed = false;        ///< the store was closed meanwhile
    bool same_session = true;   ///< the session the round went in is still the store's
    bool retried = false;       ///< this acquire already started over in a new session
    bool parents_made = false;  ///< the lock path's parents were made for this acquire
    bool queue = false;         ///< a queued acquire: not first, it keeps its node
    reply create = reply::not_sent;
    reply children = reply::ok;
    bool czxid_known = false;  ///< our node's czxid is known (this round's create, or checked)
    recipe::position pos{};    ///< where our guid stands among the contenders
};

enum class acquire_next : std::uint8_t {
    fail_closed,            ///< complete with `closed`
    start_over,             ///< the session went: once more in a new one
    fail_session_lost,      ///< the session went again: `connection_lost`
    make_parents,           ///< no lock path yet: make it, then the round again
    fail_create_uncertain,  ///< the create may have run: remember that (the guid finds it), fail
    fail_create,            ///< the create's error
    fail_children,          ///< the getChildren's error
    gone,                   ///< no node of ours (deleted under us): forget it, not acquired
    check_owner,            ///< found by its guid only: its czxid, if this session owns it, then again
    held,                   ///< ours is the first node: acquired
    queued,                 ///< not first, queued: watch the predecessor, not acquired
    withdraw,               ///< not first, a try: delete our node, not acquired
    mismatch,               ///< another kind of lock holds or waits before ours: delete our node, kind_mismatch
};

/// The next step after an acquire round, in the order the checks must run: the store and
/// the session first, then the create's reply, then the children's, then our place.
inline acquire_next judge(const acquire_round& r) noexcept
{
    if (r.closed)
        return acquire_next::fail_closed;
    if (!r.same_session)
        return r.retried ? acquire_next::fail_session_lost : acquire_next::start_over;
    if (r.create == reply::no_node && !r.parents_made)
        return acquire_next::make_parents;
    if (r.create == reply::lost)
        return acquire_next::fail_create_uncertain;
    if (r.create != reply::ok && r.create != reply::not_sent)
        return acquire_next::fail_create;
    if (r.children != reply::ok)
        return acquire_next::fail_children;
    if (!r.pos.found)
        return acquire_next::gone;
    if (!r.czxid_known)
        return acquire_next::check_owner;
    if (r.pos.foreign)
        return acquire_next::mismatch;
    if (r.pos.first)
        return acquire_next::held;
    return r.queue ? acquire_next::queued : acquire_next::withdraw;
}

}  // namespace dlock::zookeeper
