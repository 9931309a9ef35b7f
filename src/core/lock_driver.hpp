// SPDX-License-Identifier: BSL-1.0
// The per-name driver: feeds lock_fsm its inputs (calls, store replies, watch events, the
// timer) and performs the actions it returns. All lock logic lives in lock_fsm.
#pragma once

#include <dlock/config.hpp>
#include <dlock/guard.hpp>
#include <dlock/lock.hpp>
#include <dlock/stats.hpp>
#include <dlock/store.hpp>

#include "common/boxed.hpp"
#include "common/id_or_none.hpp"
#include "common/stored_handler.hpp"
#include "core/lease_policy.hpp"
#include "core/lock_fsm.hpp"
#include "core/timer_set.hpp"

#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/container/devector.hpp>
#include <boost/container/small_vector.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace dlock::detail {

class lock_driver;

/// A registry's map key: the kind and a view of the driver's own name (no copy per lock).
struct driver_key {
    lease_kind kind;
    std::string_view name;
    bool operator==(const driver_key&) const = default;
};
struct driver_key_hash {
    std::size_t operator()(const driver_key& k) const noexcept
    {
        return std::hash<std::string_view>{}(k.name) ^ (static_cast<std::size_t>(k.kind) * 0x9e3779b97f4a7c15u);
    }
};

/// What all drivers of a registry share.
struct registry_state {
    registry_state(store& s, lock_config c);

    store& st;
    boost::asio::any_io_executor ex;  // the store's, once for all drivers
    timer_set timers{ex};             // every driver's one deadline
    std::weak_ptr<void> store_alive;
    lock_config cfg;
    store_traits traits;
    boost::system::error_code config_error;
    lock_stats stats;
    std::unordered_map<driver_key, lock_driver*, driver_key_hash> drivers;  // a driver erases itself when freed
    std::unordered_map<std::string, std::weak_ptr<struct semaphore_state>> semaphores;
    std::string client_id;  // random per registry
    std::uint64_t lease_seq = 0;
    std::minstd_rand rng;
    fsm_context fsm_exclusive;  // every kind but read
    fsm_context fsm_shared;     // read: local waiters share the lease
    fsm_context& fsm_for(lease_kind k) noexcept { return k == lease_kind::read ? fsm_shared : fsm_exclusive; }

    void emit(lock_event_kind kind, const std::string& name, std::uint64_t fence);

    // Store requests in flight, and who waits for there to be none (registry::async_drain).
    std::size_t in_flight = 0;
    std::vector<std::shared_ptr<boost::asio::any_completion_handler<void(boost::system::error_code)>>> drains;
    void request_sent() noexcept { ++in_flight; }
    void request_done();
};

/// One guard's hold.
struct hold {
    std::shared_ptr<lock_driver> driver;
    std::uint64_t id = 0;
    std::uint64_t owner = 0;
    std::uint64_t fence = 0;
    bool active = true;
    clock_type::time_point granted;
    boost::asio::cancellation_signal lost;
    std::unique_ptr<boost::asio::any_completion_handler<void(boost::system::error_code)>> lost_waiter;
};

class lock_driver : public std::enable_shared_from_this<lock_driver> {
public:
    /// The state of `name` as a `kind` lease (a mutex; a read-write lock's read or write side;
    /// one permit lane of a semaphore of `capacity`), kept in the registry's map if `in_map`.
    lock_driver(std::shared_ptr<registry_state> reg, std::string name, lease_kind kind = lease_kind::mutex,
                unsigned capacity = 1, bool in_map = false);
    ~lock_driver();

    const std::string& name() const noexcept { return name_; }
    lease_kind kind() const noexcept { return kind_; }
    /// Nobody holds or waits here (a semaphore picks such a lane first).
    bool unused() const noexcept { return fsm_.holds() == 0 && fsm_.waiters() == 0; }
    std::size_t holds() const noexcept { return fsm_.holds(); }
    std::size_t waiters() const noexcept { return fsm_.waiters(); }
    /// `in_place`: the handler runs where the registry's I/O completes (detail::completes_in_place),
    /// so a completion caused by I/O calls it directly instead of dispatching it.
    void acquire(std::uint64_t owner, bool try_once, std::optional<milliseconds> limit,
                 boost::asio::any_completion_handler<lock::acquire_signature> h, bool in_place = false);
    void release(const std::shared_ptr<hold>& h,
                 boost::asio::any_completion_handler<void(boost::system::error_code)> done, bool by_destructor,
                 bool in_place = false);
    const boost::asio::any_io_executor& executor() const noexcept { return reg_->ex; }
    void wait_lost(const std::shared_ptr<hold>& h,
                   boost::asio::any_completion_handler<void(boost::system::error_code)> done);
    clock_type::time_point valid_until(const hold& h) const noexcept;
    /// The store lease behind an active hold (empty otherwise): what guard::lease() gives.
    lease_key lease_of(const hold& h) const
    {
        auto [token, ref] = fsm_.lease_id();
        return h.active ? lease_key{store_name_, token, ref} : lease_key{};
    }
    bool is_lost(const hold& h) const noexcept;
    /// The store's text for the last permanent error that failed an acquire here.
    const std::string& diagnostics() const noexcept;
    /// lock::force_release: the store's forced release of this driver's side of the name.
    void force_release(boost::asio::any_completion_handler<void(boost::system::error_code, bool)> h);

private:
    struct waiter {
        std::uint64_t owner = 0;
        stored_handler<lock::acquire_signature> handler;
        std::optional<boost::asio::steady_timer> timer;
        boost::asio::cancellation_slot slot;
        bool in_place = false;
    };
    using done_handler = boost::asio::any_completion_handler<void(boost::system::error_code)>;
    struct release_waiter {
        stored_handler<void(boost::system::error_code)> handler;
        bool in_place = false;
    };

    bool store_alive() const noexcept { return !reg_->store_alive.expired(); }
    // Takes the machine's new actions. `from_io`: the input was an I/O completion, so their
    // completions may run at once; otherwise (a call) they are posted.
    void feed(bool from_io);
    void perform(fsm_action& a, bool from_io);
    void send_release(const fsm_action& a);
    void complete_waiter(fsm_action& a, bool from_io);
    void signal_lost();
    static void timer_due(timer_entry&, std::shared_ptr<void> self);
    void apply_timer_plan();

    std::shared_ptr<registry_state> reg_;
    std::string name_;        // the user's name
    std::string store_name_;  // prefix:name, as the store sees it
    lease_kind kind_;
    unsigned capacity_;
    lock_fsm fsm_;

    // By id, in arrival order: the one served next is nearly always the first, so a list
    // found from the front beats a hash map's node per entry on the hand-off path. None
    // allocates while empty, and one hold or release fits inline: a held lock costs little
    // (std::deque took 512 bytes each, even empty).
    template <class Base>
    struct by_id : Base {
        auto find(std::uint64_t id)
        {
            return std::find_if(this->begin(), this->end(), [id](auto& e) { return e.first == id; });
        }
    };
    template <class T>
    using one_inline = boost::container::small_vector<std::pair<std::uint64_t, T>, 1>;
    by_id<boost::container::devector<std::pair<std::uint64_t, std::shared_ptr<waiter>>>> waiters_;
    by_id<one_inline<hold*>> holds_;
    by_id<one_inline<release_waiter>> releases_;
    std::uint64_t next_id_ = 0;  // waiter and release ids
    id_or_none<store::watch_id> watch_;
    id_or_none<store::watch_id> session_watch_;
    boxed<std::vector<store::watch_id>> unwatch_later_;  // after this pass's completions have run
    std::uint32_t tagged_ = 0;                           // actions of fsm_.actions() given their by_io mark
    bool in_map_ = false;
    bool running_ = false;
    bool lingering_ = false;  // counted in the registry's requests in flight
    // The pass's timer actions, applied once at its end (the last one decides): a caller
    // resumed in place runs before the Asio call, and a lease set and dropped in one pass
    // (a lock taken and released at once) makes none.
    enum class timer_plan : std::uint8_t {
        none,
        arm,
        disarm
    };
    timer_plan timer_plan_ = timer_plan::none;
    clock_type::time_point timer_at_{};
    timer_entry timer_{&lock_driver::timer_due};
    std::unique_ptr<std::string> diagnostics_;  // rare: not carried by every lock
};

}  // namespace dlock::detail
