// SPDX-License-Identifier: BSL-1.0
// What the consensus scenarios and the consensus stores' own tests share that names no store:
// a config from a URL, a throwaway directory, and the words a family gives the scenarios.
#pragma once

#include <dlock/error.hpp>

#include <stdlib.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <string_view>

namespace dlock::test {

/// The store's config parsed from `url` by its own parse_url (throws with its message).
template <class Config, class Error>
Config parsed_config(const std::string& url, bool (*parse)(std::string_view, Config&, Error&))
{
    Config c;
    Error err;
    if (!parse(url, c, err))
        throw std::runtime_error(err.message);
    return c;
}

/// A fresh directory under /tmp (the caller removes it).
inline std::string temp_dir(const char* prefix = "dlock-consensus")
{
    std::string path = std::string("/tmp/") + prefix + "-XXXXXX";
    if (!::mkdtemp(path.data()))
        throw std::runtime_error("mkdtemp failed");
    return path;
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

}  // namespace dlock::test
