// SPDX-License-Identifier: BSL-1.0
// What the consensus scenarios and the consensus stores' own tests share that names no store:
// the families' common part, a throwaway directory, and the words a family gives the scenarios.
#pragma once

#include <dlock/error.hpp>
#include <dlock/store.hpp>

#include "common/scratch_dir.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <stdlib.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <string_view>

namespace dlock::test {

/// What a family's adapter (consensus/etcd_family.hpp, consensus/zookeeper_family.hpp) names
/// alike whatever the store: its store, cluster and config, and a config read from a URL by
/// the store's own parse_url (which throws with its message on a URL it refuses).
template <class Store, class Cluster, class Config, class Error, bool (*Parse)(std::string_view, Config&, Error&)>
struct consensus_family_base {
    using store = Store;
    using cluster = Cluster;
    using config = Config;
    using config_error = Error;
    static bool parse_url(std::string_view url, config& c, config_error& err) { return Parse(url, c, err); }
    static config config_of(const std::string& url)
    {
        config c;
        config_error err;
        if (!Parse(url, c, err))
            throw std::runtime_error(err.message);
        return c;
    }
};

/// A fresh directory under /tmp, removed when the test process exits.
inline std::string temp_dir(const char* prefix = "dlock-consensus")
{
    return dlock::test::scratch_dir(prefix);
}

/// What a consensus store says that the scenarios check, in its own words.
struct consensus_words {
    /// An election leaves the holder's lease alone (a session outlives it); otherwise the
    /// holder may be told it lost the lock while the cluster elects.
    bool holder_outlives_an_election;
    boost::system::error_code not_the_store;    ///< a server that speaks something else
    const char* not_the_store_text;             ///< in last_error_text() then
    bool not_the_store_is_transient;            ///< that error is retried (a connect that failed)
    boost::system::error_code too_big;          ///< a request over the servers' size limit
    const char* too_big_text;                   ///< in last_error_text() then: the limit's name
    std::chrono::milliseconds time_left_lease;  ///< the registry's lease when status() tells the time left
    long time_left_above, time_left_at_most;    ///< status().ttl (ms) of a fresh holder of the asking store
    bool others_see_time_left;                  ///< another store's status() tells it too
};

/// The store's view of `name` until `pred` holds (bounded, 30 s): nothing tells when a
/// process of another library (Curator, etcdctl) has queued its node or key.
template <class Pred>
boost::asio::awaitable<dlock::lock_status> status_until(dlock::store& st, const std::string& name, Pred pred)
{
    using namespace std::chrono_literals;
    boost::asio::steady_timer t(co_await boost::asio::this_coro::executor);
    dlock::lock_status s;
    for (int i = 0; i < 3000; ++i) {
        s = co_await st.async_status(name, boost::asio::use_awaitable);
        if (pred(s))
            break;
        t.expires_after(10ms);
        co_await t.async_wait(boost::asio::use_awaitable);
    }
    co_return s;
}

}  // namespace dlock::test
