// SPDX-License-Identifier: BSL-1.0
// A queued token's wait for the entry just before its own to go, sans-io: the recipe of
// etcd's concurrency.Mutex (waitDeletes) and of Curator's InterProcessMutex, which both
// stores follow. The store reads its place (check), watches the predecessor the read names,
// and reads again when that one goes; the first place is the grant. The store performs the
// actions (etcd: src/etcd/queue.cpp, ZooKeeper: src/zookeeper/queue.cpp); every state x
// input pair is a case of test/unit/common/predecessor_wait_test.cpp.
//
// By state (W: the predecessor watched, if any; a watch input naming another key is stale):
//   idle      start: check. lost: resync. abandon: done.
//   checking  first: grant. gone: resync. behind(k, rev): watch k (kept if W is k), or check
//             again if W went meanwhile. check_failed: pause (retrying) or resync. W gone:
//             drop W, check again after this one. W ready past the read: check again after.
//             W failed: drop W (retrying: the read's place is watched anew) or resync.
//   watching  W gone: check. W ready past the read: check. W failed: pause or resync.
//   pausing   timer: check. W gone or failed: drop W (the check comes anyway).
//   done      nothing.
// In every state but done: lost ends with resync, abandon ends telling nobody; what is
// watched or timed is cancelled first.
#pragma once

#include "common/action_loop.hpp"
#include "common/backoff.hpp"
#include "common/watch_table.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace dlock::detail {

enum class wait_state : std::uint8_t {
    idle,
    checking,
    watching,
    pausing,
    done
};

struct wait_action {
    enum class type : std::uint8_t {
        check,         ///< read our place (the store first asks whether anybody still waits)
        watch,         ///< watch `key` (the predecessor) for its deletion
        cancel_watch,  ///< the watch is not wanted any more
        set_timer,     ///< a pause of `delay`, then the input timer
        cancel_timer,
        grant,   ///< ours is the first entry: tell the token's watcher (the wait is done)
        resync,  ///< the wait ended without a grant: the waiter asks again
    };
    type t;
    std::string key{};
    std::chrono::milliseconds delay{0};
};

class predecessor_wait {
public:
    /// With `retry`, a failed read or watch is tried again after a jittered pause (etcd: a
    /// failed request says nothing of the lease). Without, it ends with resync (ZooKeeper:
    /// a failure there puts the session, and so our node, in doubt).
    explicit predecessor_wait(std::minstd_rand* retry = nullptr) noexcept : rng_(retry) {}

    void start();
    // The check's reply: our entry is the first, is gone, or stands behind `key`
    // (`revision`: the store's revision of the read, 0 if it has none).
    void on_first();
    void on_gone();
    void on_behind(const std::string& key, std::int64_t revision);
    void on_check_failed();
    // The watch of `key`: live from `revision` (an etcd watch's created event; ZooKeeper's
    // read-and-watch is one step: 0), its key deleted (or the watch cut short: look again),
    // or failed.
    void on_watch_ready(const std::string& key, std::int64_t revision);
    void on_predecessor_gone(const std::string& key);
    void on_watch_failed(const std::string& key);
    void on_timer();
    /// The session or lease that carried our entry went: the waiter asks again.
    void on_lost();
    /// Nobody waits any more, or the store closes: end, telling nobody.
    void on_abandon();

    wait_state state() const noexcept { return state_; }
    bool done() const noexcept { return state_ == wait_state::done; }
    /// The key watched now (empty: none).
    const std::string& watching() const noexcept { return watching_; }
    std::vector<wait_action>& actions() noexcept { return actions_; }
    /// drive() is performing this wait's actions (an input raised meanwhile waits for it).
    bool driving = false;

private:
    using type = wait_action::type;
    void emit(type t, std::string key = {}, std::chrono::milliseconds d = {})
    {
        actions_.push_back({t, std::move(key), d});
    }
    void check();
    void drop_watch();
    void fail();  // a failed read or watch
    void end(bool tell_resync);

    std::minstd_rand* rng_;
    backoff pause_{std::chrono::milliseconds(20), std::chrono::milliseconds(1000)};
    wait_state state_ = wait_state::idle;
    std::string watching_;
    std::int64_t checked_ = 0;  // the revision of the last read
    bool check_again_ = false;  // something happened while a check was in flight
    std::vector<wait_action> actions_;
};

/// Feeds one input (`in(wait)`) and performs its actions with `perform(action)` in order.
/// An input an action raises meanwhile is fed at once, and its actions are performed after
/// the rest of the batch by the outer call (never nested, as pipe_host does).
template <class Input, class Perform>
void drive(predecessor_wait& w, Input&& in, Perform&& perform)
{
    in(w);
    perform_in_order(w.actions(), w.driving, perform);
}

/// A store's waits, one per (name, token). `Entry` has `name`, `token` and `wait`; the
/// store performs the actions; a wait that is done leaves the queue.
template <class Entry>
class wait_queue {
public:
    using ptr = std::shared_ptr<Entry>;
    using perform_fn = std::function<void(const ptr&, const wait_action&)>;

    explicit wait_queue(perform_fn perform) : perform_(std::move(perform)) {}

    ptr find(const std::string& name, const std::string& token) const
    {
        auto it = waits_.find({name, token});
        return it == waits_.end() ? nullptr : it->second;
    }
    /// Starts `q`, abandoning the key's earlier wait if there is one.
    void start(const ptr& q)
    {
        drop(q->name, q->token);
        waits_[{q->name, q->token}] = q;
        feed(q, [](predecessor_wait& w) { w.start(); });
    }
    template <class Input>
    void feed(const ptr& q, Input&& in)
    {
        drive(q->wait, in, [&](const wait_action& a) { perform_(q, a); });
        auto it = waits_.find({q->name, q->token});
        if (q->wait.done() && it != waits_.end() && it->second == q)
            waits_.erase(it);
    }
    /// Nobody waits for the key's grant any more: end, telling nobody.
    void drop(const std::string& name, const std::string& token)
    {
        if (auto q = find(name, token))
            feed(q, [](predecessor_wait& w) { w.on_abandon(); });
    }
    /// After watch_table::remove(): a token's last watcher gone ends its wait (nobody waits
    /// for its grant); a name's last untokened watcher gone gives the name, whose watch by
    /// the store can stop.
    std::optional<std::string> unwatched(const watch_table::removed& r)
    {
        if (!r.last)
            return std::nullopt;
        if (r.kind == watch_table::removed::what::untokened)
            return r.name;
        drop(r.name, r.token);
        return std::nullopt;
    }
    /// Every wait: its session or lease went (`lost`: told resync), or the store closes.
    void end_all(bool lost)
    {
        for (auto& [k, q] : std::map(waits_))
            feed(q, [lost](predecessor_wait& w) { lost ? w.on_lost() : w.on_abandon(); });
    }

private:
    perform_fn perform_;
    std::map<std::pair<std::string, std::string>, ptr> waits_;
};

}  // namespace dlock::detail
