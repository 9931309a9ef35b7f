// SPDX-License-Identifier: BSL-1.0
// mariadb_store's state, shared by its two files: store.cpp (connections, the mutex, the
// GET_LOCK waits and the doorbell's sleeper) and store_primitives.cpp (read-write locks,
// semaphores, elections and latches).
#pragma once

#include <dlock/mariadb/store.hpp>

#include "common/watch_table.hpp"
#include "mariadb/connection.hpp"
#include "mariadb/doorbell.hpp"
#include "mariadb/sql.hpp"
#include "mariadb/wait_pool.hpp"

#include <boost/asio/steady_timer.hpp>

#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace dlock {

struct mariadb_store::impl : std::enable_shared_from_this<impl> {
    using conn_t = mariadb::detail::connection;
    using milliseconds = std::chrono::milliseconds;

    explicit impl(boost::asio::any_io_executor e)
        : ex(e), watches(e, detail::watch_table::tokens::with_name), bell_timer(e)
    {
    }

    struct slot {
        std::unique_ptr<conn_t> conn;
        std::string name;  // waited for
    };

    boost::asio::any_io_executor ex;
    mariadb::config cfg;
    std::unique_ptr<conn_t> conn;
    std::string bad_config;  // why the config was refused (empty: it was not)
    // The GET_LOCK waits: the machine decides (wait_pool.hpp), `slots` are its connections.
    mariadb::detail::wait_pool pool{0};
    std::vector<slot> slots;
    // A queued token waits for its name's enrolment (its sleeper is its liveness), and hears rings.
    detail::watch_table watches;
    std::minstd_rand rng{std::random_device{}()};
    // The doorbell: the machine decides (doorbell.hpp), `sleeper` runs its SLEEP.
    mariadb::detail::doorbell bell;
    std::unique_ptr<conn_t> sleeper;
    boost::asio::steady_timer bell_timer;
    // The lease each queued token asked for (a hand-off sets it), and each rung name's mutex
    // holder as the sleeper last read it: a ring that made a queued token the holder is its grant.
    std::map<std::pair<std::string, std::string>, milliseconds> queued;
    std::map<std::string, mariadb::detail::bell_row> holders;

    std::unique_ptr<conn_t> ringer;  // sends the KILLs of rings, opened on the first
    bool closed = false;

    void tell_rung(const std::string& name);
    /// A query on the main connection; the rings in its result go out (wake()) before `h` runs.
    void exec(std::string text, boost::asio::any_completion_handler<conn_t::exec_signature> h);
    /// KILL QUERY to the sleepers a change rang, on the ringer connection (a KILL may wait for
    /// its target: never on the main connection); then `then`.
    void wake(const std::vector<std::uint64_t>& conns, std::function<void()> then);

    // Someone watches `name` and the store is open.
    bool watched(const std::string& name) const { return watches.name_live(name); }
    // The sleeper a queued waiter of `name` lives by; 0 (do not queue) unless enrolled.
    std::uint64_t listener(const std::string& name) const { return bell.enrolled(name) ? bell.conn() : 0; }

    void observe(const std::string& name, const mariadb::sql::holder_info& h, acquire_result& out);
    void perform();
    void start_wait(std::size_t k, const std::string& name, milliseconds timeout);
    void on_wait_done(std::size_t k, boost::system::error_code ec, const mariadb::sql::result& res);
    void perform_bell();
    void start_sleep(std::pair<std::uint64_t, std::uint64_t> baseline);
    conn_t& open_sleeper();
    void poll_without_bell();
    /// A set's release on the main connection; `force` as sql::set_release's.
    void release_set(mariadb_store::error_text_keeper keep, const std::string& name, const std::string& token,
                     char force, boost::asio::any_completion_handler<store::bool_signature> h);
};

}  // namespace dlock
