// SPDX-License-Identifier: BSL-1.0
// The I/O half of redis_store's no-scripting mode: runs tx_recipe's transactions one at a
// time on a connection of their own (WATCH is per connection), retrying on conflict.
#pragma once

#include <dlock/redis/config.hpp>
#include <dlock/store.hpp>

#include "redis/tx_recipe.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace dlock::redis::tx {

/// Settings of the runner.
struct runner_options {
    /// Conflicts (a watched key changed) one operation retries before it fails with
    /// error::server_busy (transient: the lock retries it with backoff).
    int max_conflicts = 32;
    /// After an acquire, WAIT for this many replicas (0: don't), bounded by wait_timeout.
    int wait_replicas = 0;
    std::chrono::milliseconds wait_timeout{100};
};

/// Runs transactions in FIFO order on its own connection. Completions run on the executor,
/// never inside the initiating call. Lifetime: close() (or the destructor) fails what is
/// pending with error::closed; the background coroutine keeps only its own state alive.
class runner {
public:
    /// `keep` receives the server's text of a failure (the store's set_error_text).
    runner(boost::asio::any_io_executor ex, config cfg, runner_options opts, std::function<void(std::string)> keep);
    ~runner();
    runner(const runner&) = delete;
    runner& operator=(const runner&) = delete;

    void acquire(names k, std::string token, std::chrono::milliseconds ttl,
                 boost::asio::any_completion_handler<store::acquire_signature> h);
    void renew(names k, std::string token, std::chrono::milliseconds ttl,
               boost::asio::any_completion_handler<store::renew_signature> h);
    void release(names k, std::string token, boost::asio::any_completion_handler<store::bool_signature> h);
    void force_release(names k, boost::asio::any_completion_handler<store::bool_signature> h);
    void status(names k, boost::asio::any_completion_handler<store::status_signature> h);

    /// WATCH conflicts retried so far (for tests and stats).
    std::uint64_t conflicts() const noexcept;
    void close();

private:
    struct state;
    std::shared_ptr<state> state_;
};

}  // namespace dlock::redis::tx
