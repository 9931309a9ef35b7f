// SPDX-License-Identifier: BSL-1.0
// MariaDB's doorbell, sans-io: how waiters, observers and latch waiters of every kind hear
// that a name changed. MariaDB has no NOTIFY; what it has is KILL QUERY, which ends another
// connection's running statement within milliseconds. So each store keeps one sleeper
// connection that runs `SLEEP(t)` while anything is watched, and enrols the names it watches
// in the table `<table>_bell` (name, the sleeper's connection id, a ring count). A change
// (a set's release or grant, a mutex's release, a proclaim, the last count-down) adds one to
// the name's rows and KILLs the enrolled sleepers' queries (src/mariadb/bell_sql.cpp).
//
// A ring is never lost: the sleeper's query first reads its rows, then sleeps only if they
// are as its previous read left them (count and sum of rings); a KILL that comes while it is
// not inside a query is forgotten by the server, but its ring count is read by the next one.
// A new sleeper connection (a reconnect) enrols every name again and re-checks them
// (`resync`). The store performs the actions (src/mariadb/store.cpp); the unit tests are
// test/unit/mariadb/doorbell_test.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dlock::mariadb::detail {

struct bell_action {
    enum class type : std::uint8_t {
        sleep,     ///< run the sleeper's query with `baseline` (after `delay`)
        enrol,     ///< register `names` for sleeper `conn` (rings 0); then on_enrolled
        leave,     ///< deregister `names` of `conn` (empty: every row of `conn`)
        ready,     ///< tell `names`' watchers: changes reach them from now on
        released,  ///< tell `names`' watchers: the name changed
        resync,    ///< tell `names`' watchers: changes may have been missed, re-check
    };
    type t;
    std::vector<std::string> names{};
    std::uint64_t conn = 0;
    std::pair<std::uint64_t, std::uint64_t> baseline{};  ///< sleep: (rows, sum of rings) last read
    std::chrono::milliseconds delay{0};
};

/// One name enrolled for the sleeper, as read: its rings and its mutex's live holder (a
/// hand-off's new holder learns of its grant from it).
struct bell_row {
    std::string name;
    std::uint64_t rings = 0;
    std::optional<std::string> owner{};
    std::uint64_t fence = 0;
};

/// What one run of the sleeper's query read (before its SLEEP ended, was killed or failed).
struct bell_reading {
    std::uint64_t conn = 0;  ///< the sleeper's connection id; 0: the query read nothing
    /// A value of the sleeper's session alone: an id the server gives again (after a
    /// restart) is still another sleeper.
    std::string session{};
    std::vector<bell_row> rows{};
};

class doorbell {
public:
    using milliseconds = std::chrono::milliseconds;

    /// The first watcher of `name`.
    void watch(const std::string& name);
    /// The last watcher of `name` went.
    void unwatch(const std::string& name);
    /// The sleeper's query ended: `failed` if it ended other than by its SLEEP or a KILL.
    void on_sleep_done(const bell_reading& r, bool failed);
    /// An enrol action ended (`ok`: the rows are in; not: tried again after the next sleep).
    void on_enrolled(const std::vector<std::string>& names, std::uint64_t conn, bool ok);
    /// The bell table is missing or refused to the user: every name is `ready` at once from
    /// now on, no sleeper runs, and waiters sleep their bound.
    void on_unavailable();
    /// The store closes: nothing more is started or told.
    void close();

    std::vector<bell_action>& actions() noexcept { return actions_; }
    /// The sleeper's connection id as last read (0: not yet).
    std::uint64_t conn() const noexcept { return conn_; }
    /// Whether `name` is enrolled for the current sleeper.
    bool enrolled(const std::string& name) const;

private:
    struct name_state {
        bool enrolled = false;    // its row is in for conn_
        bool failed = false;      // its enrolment failed: tried again after the next sleep
        bool told_ready = false;  // `ready` went out (later enrolments say `resync`)
        std::uint64_t rings = 0;  // as last read (0 after enrolment)
    };
    void enrol(std::vector<std::string> names);
    void sleep_again(milliseconds delay);
    bool wanted() const;  // a name is enrolled or being enrolled: the sleeper runs

    bool closed_ = false;
    bool unavailable_ = false;  // no bell table for this user
    bool sleeping_ = false;     // the sleeper's query is out
    std::uint64_t conn_ = 0;
    std::string session_;
    std::pair<std::uint64_t, std::uint64_t> baseline_{~std::uint64_t{0}, 0};  // none read yet: never equal
    milliseconds backoff_{0};
    std::map<std::string, name_state> names_;
    std::vector<bell_action> actions_;
};

}  // namespace dlock::mariadb::detail
