// SPDX-License-Identifier: BSL-1.0
// MariaDB's release notifications, sans-io: a waiter's refused attempt that finds the holder
// with its signal lock starts a GET_LOCK wait on that lock from a small pool of connections;
// the wait ends when the holder lets go (`released`), at the holder's lease end (wait again
// if a newer attempt saw a holder), or with an error (`resync`: whatever it missed, re-check).
// A busy pool leaves the name to sleep its holder's lease until a connection frees. The store
// performs the actions (src/mariadb/store.cpp); every name state x input pair is a case of
// test/unit/mariadb/wait_pool_test.cpp.
//
// A name's states (state()): none; known (nothing seen since its last wait); pending (seen
// since, no connection free); waiting (a wait runs); waiting+seen (a newer attempt saw the
// holder meanwhile: when this wait times out, another starts).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dlock::mariadb::detail {

struct pool_action {
    enum class type : std::uint8_t {
        open,      ///< a new wait connection, numbered `slot` (the next in order)
        wait,      ///< GET_LOCK `name`'s signal lock on `slot` for up to `timeout`
        abort,     ///< end the wait on `slot` now (nobody waits for its name)
        released,  ///< tell `name`'s watchers: the holder let go
        resync,    ///< tell `name`'s watchers: the wait failed, re-check
    };
    type t;
    std::size_t slot = 0;
    std::string name{};
    std::chrono::milliseconds timeout{0};
};

/// How a wait ended.
enum class wait_end : std::uint8_t {
    released,
    timed_out,
    failed
};

class wait_pool {
public:
    using milliseconds = std::chrono::milliseconds;
    /// Up to `connections` waits at once (0: no waits, no notifications).
    explicit wait_pool(std::size_t connections) noexcept : max_(connections) {}

    /// A refused attempt on `name` found its holder (`signal`: holding the signal lock, its
    /// lease `remaining`); `watched`: somebody watches the name. True if a wait runs that
    /// will wake the name's waiters (false: they sleep the holder's lease).
    bool observe(const std::string& name, bool signal, milliseconds remaining, bool watched);
    /// The wait on `slot` ended; `watched`: somebody still watches its name.
    void on_done(std::size_t slot, wait_end end, bool watched);
    /// The name's last watcher went.
    void on_unwatched(const std::string& name);
    /// The store closes: nothing more is started or told.
    void close();

    std::vector<pool_action>& actions() noexcept { return actions_; }
    std::size_t connections() const noexcept { return slots_.size(); }
    /// The name's state, as named above.
    const char* state(const std::string& name) const;

private:
    struct name_state {
        std::uint64_t seen = 0;     // refused attempts that found the holder with its signal lock
        std::uint64_t waited = 0;   // `seen` when the last wait started
        milliseconds remaining{0};  // the holder's remaining lease then
        int slot = -1;              // the connection waiting, -1 if none
    };
    void schedule(const std::string& name);
    int free_slot();

    std::size_t max_;
    bool closed_ = false;
    std::vector<std::string> slots_;  // the name each connection waits for; empty: free
    std::map<std::string, name_state> names_;
    std::vector<pool_action> actions_;
};

}  // namespace dlock::mariadb::detail
