// SPDX-License-Identifier: BSL-1.0
// `dlock status`, `dlock release --force`, and what every command does first: connect.
#include "cli/commands.hpp"
#include "cli/exit_status.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <iostream>

namespace dlock::cli {

namespace asio = boost::asio;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

std::string store_name(const options& o)
{
    return o.prefix.empty() ? o.name : o.prefix + ":" + o.name;
}

asio::awaitable<int> connect_or_explain(const options&, store& st)
{
    auto [ec] = co_await st.async_connect(use_tuple);
    if (!ec)
        co_return exit_status::ok;
    std::cerr << "dlock: cannot use the server at " << st.describe() << ": " << ec.message();
    if (!st.last_error_text().empty())
        std::cerr << " (" << st.last_error_text() << ")";
    std::cerr << "\n";
    co_return exit_status::unavailable;
}

namespace {

// An operation's failure, with the server's own words when it gave any (a refusal after a
// good connect, such as a missing privilege on the table, says why only there).
int operation_failed(const char* what, const options& o, boost::system::error_code ec, const store& st)
{
    std::cerr << "dlock: " << what << " of '" << o.name << "' failed: " << ec.message();
    if (!st.last_error_text().empty())
        std::cerr << " (" << st.last_error_text() << ")";
    std::cerr << "\n";
    return exit_status::unavailable;
}

bool check_name(const options& o)
{
    if (o.name.size() <= 1024 && o.name.find('\0') == std::string::npos)
        return true;
    std::cerr << "dlock: the lock name is longer than 1024 bytes\n";
    return false;
}

}  // namespace

asio::awaitable<int> status_command(const options& o, store& st)
{
    if (!check_name(o))
        co_return exit_status::usage;
    if (int rc = co_await connect_or_explain(o, st))
        co_return rc;
    auto [ec, s] = co_await st.async_status(store_name(o), use_tuple);
    if (ec)
        co_return operation_failed("status", o, ec, st);
    if (o.json) {
        boost::json::object j;
        j["name"] = o.name;
        j["prefix"] = o.prefix;
        j["key"] = s.key;
        j["held"] = s.held;
        j["ttl_ms"] = s.held ? s.ttl.count() : -1;
        j["fencing_token"] = s.fencing_token;
        j["last_fencing_token"] = s.last_fencing_token;
        j["holder"] = s.holder;
        j["queued"] = s.queued;
        j["kind"] = s.kind == lease_kind::permit   ? "semaphore"
                    : s.kind == lease_kind::read   ? "rw_lock"
                    : s.kind == lease_kind::leader ? "election"
                                                   : "mutex";
        if (s.kind == lease_kind::read || s.kind == lease_kind::permit) {
            j["holders"] = s.holders;
            j["writer"] = s.writer;
            if (s.kind == lease_kind::permit)
                j["permits"] = s.capacity;
        }
        std::cout << boost::json::serialize(j) << "\n";
    } else if (s.kind == lease_kind::permit) {
        std::cout << o.name << ": semaphore of " << s.capacity << " permits, " << s.holders << " held, " << s.queued
                  << " queued, last fencing token issued " << s.last_fencing_token << "\n";
    } else if (s.kind == lease_kind::read) {
        std::cout << o.name << ": read-write lock, ";
        if (s.writer)
            std::cout << "held by a writer (fencing token " << s.fencing_token << ")";
        else
            std::cout << (s.holders == 0 ? "free" : std::to_string(s.holders) + " reader lease(s)");
        std::cout << ", " << s.queued << " queued, last fencing token issued " << s.last_fencing_token << "\n";
    } else if (s.held) {
        std::cout << o.name << ": held, " << s.ttl.count() << " ms of lease left, fencing token " << s.fencing_token
                  << " (last issued " << s.last_fencing_token << "), holder " << s.holder;
        if (s.queued > 0)
            std::cout << ", " << s.queued << " queued";
        std::cout << "\n";
    } else {
        std::cout << o.name << ": free (last fencing token issued " << s.last_fencing_token << ")\n";
    }
    co_return exit_status::ok;
}

asio::awaitable<int> release_command(const options& o, store& st)
{
    if (!check_name(o))
        co_return exit_status::usage;
    if (int rc = co_await connect_or_explain(o, st))
        co_return rc;
    auto side = o.shared ? lease_kind::read : o.exclusive ? lease_kind::write : lease_kind::mutex;
    if (side != lease_kind::mutex) {
        // A side of a name in use as another primitive frees nothing: say what it is instead.
        auto [sec, s] = co_await st.async_status(store_name(o), use_tuple);
        if (sec)
            co_return operation_failed("status", o, sec, st);
        bool other = s.kind == lease_kind::permit || (s.kind == lease_kind::mutex && (s.held || s.queued > 0));
        if (other) {
            std::cerr << "dlock: '" << o.name << "' is in use as "
                      << (s.kind == lease_kind::permit ? "a semaphore" : "a mutex")
                      << ", not a read-write lock: release it without --shared or --exclusive\n";
            co_return exit_status::kind_mismatch;
        }
    }
    auto [ec, was_held] = co_await st.async_force_release(store_name(o), side, use_tuple);
    if (ec)
        co_return operation_failed("release", o, ec, st);
    const char* what =
        side == lease_kind::read    ? ": readers released (they were held; each loses its lease at its next renewal)\n"
        : side == lease_kind::write ? ": writer released (it was held; it loses its lease at its next renewal)\n"
                                    : ": released (it was held; its holder loses it at its next renewal)\n";
    const char* none = side == lease_kind::read    ? ": no reader held it\n"
                       : side == lease_kind::write ? ": no writer held it\n"
                                                   : ": was not held\n";
    std::cout << o.name << (was_held ? what : none);
    co_return exit_status::ok;
}

}  // namespace dlock::cli
