// The per-name lock engine: local FIFO, the one store conversation, hand-off, watchdog.
#pragma once

#include <dlock/config.hpp>
#include <dlock/guard.hpp>
#include <dlock/lock.hpp>
#include <dlock/stats.hpp>
#include <dlock/store.hpp>

#include "core/lease_policy.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>

#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

namespace dlock::detail {

class engine;

/// What all engines of a registry share.
struct registry_state {
    registry_state(store& s, lock_config c);

    store& st;
    std::weak_ptr<void> store_alive;
    lock_config cfg;
    boost::system::error_code config_error;
    milliseconds drift;
    milliseconds renew_every;
    lock_stats stats;
    std::unordered_map<std::string, engine*> engines;  // an engine erases itself when freed
    std::string client_id;                             // random per registry
    std::uint64_t lease_seq = 0;
    std::minstd_rand rng;

    std::string new_token() { return client_id + std::to_string(++lease_seq); }
    void emit(lock_event_kind kind, const std::string& name, std::uint64_t fence);
};

/// One guard's hold.
struct hold {
    std::shared_ptr<engine> eng;
    std::uint64_t owner = 0;
    std::uint64_t fence = 0;
    bool active = true;
    clock_type::time_point granted;
    boost::asio::cancellation_signal lost;
    std::unique_ptr<boost::asio::any_completion_handler<void(boost::system::error_code)>> lost_waiter;
};

/// One pending acquire.
struct waiter {
    std::uint64_t owner = 0;
    bool try_once = false;
    bool done = false;
    clock_type::time_point started;
    boost::asio::any_completion_handler<lock::acquire_signature> handler;
    std::optional<boost::asio::steady_timer> timer;
    boost::asio::cancellation_slot slot;
};

class engine : public std::enable_shared_from_this<engine> {
public:
    engine(std::shared_ptr<registry_state> reg, std::string name);
    ~engine();

    const std::string& name() const noexcept { return name_; }
    void acquire(std::uint64_t owner, bool try_once, std::optional<milliseconds> limit,
                 boost::asio::any_completion_handler<lock::acquire_signature> h);
    void release(const std::shared_ptr<hold>& h,
                 boost::asio::any_completion_handler<void(boost::system::error_code)> done, bool by_destructor);
    void wait_lost(const std::shared_ptr<hold>& h,
                   boost::asio::any_completion_handler<void(boost::system::error_code)> done);
    clock_type::time_point valid_until(const hold& h) const noexcept;
    bool is_lost(const hold& h) const noexcept;

private:
    struct lease_state {
        std::string token;
        std::uint64_t fence = 0;
        clock_type::time_point valid_until;
        bool suspect = false;
        bool lost = false;
        bool dog_running = false;  // the watchdog coroutine runs (else only its timer is armed)
    };

    bool has_waiters() const noexcept { return !queue_.empty(); }
    void pump();
    void grant();
    void remove_waiter(const std::shared_ptr<waiter>& w, boost::system::error_code ec);
    void finish_waiter(waiter& w, boost::system::error_code ec, guard g);
    void complete_try_waiters(boost::system::error_code ec = {});
    void fail_waiters(boost::system::error_code ec);
    std::shared_ptr<hold> new_hold(std::uint64_t owner);
    void mark_lost();
    void background_release(std::string token);
    void store_release(std::string token, boost::asio::any_completion_handler<void(boost::system::error_code)> done,
                       int attempt);
    void start_watch();
    void stop_watch();
    void end_wait(bool withdraw);
    void drop_token(const std::string& token);
    bool take_grant(const grant_notice& g);

    // What the driver does after an attempt at the store.
    enum class next_step { granted, stop, retry, backoff, wait, pause };
    void start_driver();
    next_step on_attempt(std::string& token, clock_type::time_point sent, boost::system::error_code ec,
                         const acquire_result& res);
    void arm_watchdog();
    static boost::asio::awaitable<void> drive(std::shared_ptr<engine> self, next_step step, acquire_result last);
    static boost::asio::awaitable<void> watchdog(std::shared_ptr<engine> self, std::string token);
    boost::asio::awaitable<bool> wait_until(clock_type::time_point deadline);

    std::shared_ptr<registry_state> reg_;
    std::string name_;        // the user's name
    std::string store_name_;  // prefix:name, as the store sees it
    boost::asio::any_io_executor ex_;

    std::uint64_t holder_ = 0;  // owner id of the local holder(s)
    std::vector<hold*> holds_;
    std::deque<std::shared_ptr<waiter>> queue_;

    std::optional<lease_state> lease_;
    unsigned handoffs_ = 0;
    bool yield_next_ = false;   // another process asked: give the lease back at the next release
    bool yield_pause_ = false;  // the driver pauses before competing again
    bool check_now_ = false;    // ask the watchdog to renew (and learn of contention) now

    bool in_io_ = false;  // running inside a store callback: completions may run at once
    bool driving_ = false;
    std::uint64_t sleeping_gen_ = 0;  // the driver_gen_ of a driver asleep in wait_until, else 0
    std::uint64_t driver_gen_ = 0;  // a driver coroutine that finds it changed has been superseded
    int late_replies_ = 0;  // consecutive acquire replies that came after the lease's end
    std::optional<store::watch_id> watch_;
    std::uint64_t watch_gen_ = 0;  // which watch a callback belongs to
    bool watch_ready_ = false;
    bool notified_ = false;
    // Direct hand-off (store::direct_handoff()): a wait keeps one token, queued at the store,
    // and a release elsewhere may hand the name straight to it.
    bool direct_ = false;
    std::string wait_token_;
    std::optional<clock_type::time_point> queued_since_;  // send time of its first queued attempt
    std::optional<grant_notice> grant_;
    std::string spent_token_;  // the last wait token withdrawn while an attempt may be in flight
    boost::asio::steady_timer wake_;  // the driver sleeps on it
    boost::asio::steady_timer dog_;   // the watchdog sleeps on it
};

}  // namespace dlock::detail
