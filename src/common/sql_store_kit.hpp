// SPDX-License-Identifier: BSL-1.0
// What the SQL stores (PostgreSQL, MariaDB) do alike around their statements: the checks
// before one is sent, the table a config may not name, the traits, the connect's and the
// status's replies. Header-only: each SQL backend's store includes it.
#pragma once

#include <dlock/error.hpp>
#include <dlock/store.hpp>

#include "common/post_completion.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <string>
#include <string_view>
#include <utility>

namespace dlock::detail {

/// The longest lease the SQL stores keep (their timestamp arithmetic is exact far beyond).
inline constexpr std::chrono::milliseconds sql_max_ttl{30LL * 24 * 3600 * 1000};

inline bool sql_valid_ttl(std::chrono::milliseconds ttl)
{
    return ttl.count() > 0 && ttl <= sql_max_ttl;
}

/// A config's table that the store's check refused (`why` not empty) is never put into SQL:
/// it becomes the default table, and the text returned fails every operation (empty: none).
inline std::string refuse_table(std::string& table, const std::string& why, std::string_view store)
{
    if (why.empty())
        return {};
    table = "dlock_locks";
    return std::string(store) + ": config.table: " + why;
}

/// The traits both SQL stores have: leases on a table row, fenced by a durable sequence, in
/// milliseconds; no queue of the server's own.
inline store_traits sql_traits()
{
    store_traits t;
    t.inherent_queue = false;
    t.live = liveness::per_lease;
    t.durable_fencing = true;
    t.ttl_granularity = std::chrono::milliseconds(1);
    t.min_ttl = std::chrono::milliseconds(1);
    t.max_ttl = sql_max_ttl;
    return t;
}

/// do_connect's completion for a connection's exec(): the error alone, the server's text kept.
template <class Result, class Keep, class Handler>
auto connect_reply(boost::asio::any_io_executor ex, Keep keep, Handler h)
{
    return [ex = std::move(ex), keep = std::move(keep), h = std::move(h)](boost::system::error_code ec,
                                                                          Result res) mutable {
        if (ec && !res.message.empty())
            keep(res.message);
        post_completion(ex, std::move(h), ec);
    };
}

/// sql_reply's `value` for do_status: the status decoded, keyed by `table/name`.
inline auto status_keyed(const std::string& table, const std::string& name)
{
    return [key = table + "/" + name](boost::system::error_code, lock_status& out) {
        out.key = key;
        return std::move(out);
    };
}

}  // namespace dlock::detail
