// SPDX-License-Identifier: BSL-1.0
// One Asio timer for every driver of a registry. A driver waiting for a time costs an
// intrusive node, not a steady_timer and a pending wait of its own (~300 bytes less per
// held lock: the watchdog keeps a timer armed for every one).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/intrusive/set.hpp>

#include <chrono>
#include <memory>

namespace dlock::detail {

/// A place in a timer_set, embedded in its owner. While armed, the set keeps the owner
/// alive (as a pending wait on the owner's own timer would).
struct timer_entry : boost::intrusive::set_base_hook<boost::intrusive::link_mode<boost::intrusive::safe_link>,
                                                     boost::intrusive::optimize_size<true>> {
    using clock = std::chrono::steady_clock;
    /// Called when due, already unlinked; `owner` is the reference the set kept.
    using due_fn = void (*)(timer_entry&, std::shared_ptr<void> owner);

    explicit timer_entry(due_fn f) noexcept : on_due(f) {}
    timer_entry(const timer_entry&) = delete;
    timer_entry& operator=(const timer_entry&) = delete;
    bool armed() const noexcept { return is_linked(); }

    clock::time_point due{};
    std::shared_ptr<void> owner;
    due_fn on_due;
};

class timer_set {
public:
    explicit timer_set(boost::asio::any_io_executor ex) : ex_(std::move(ex)) {}
    ~timer_set();
    timer_set(const timer_set&) = delete;
    timer_set& operator=(const timer_set&) = delete;

    /// Arms `e` for `due` (moving it if armed); `owner` lives at least until it fires or is disarmed.
    void arm(timer_entry& e, timer_entry::clock::time_point due, std::shared_ptr<void> owner);
    /// Unlinks `e` if armed. Returns the owner's reference: the caller drops it where the
    /// owner may safely be freed.
    std::shared_ptr<void> disarm(timer_entry& e) noexcept;

private:
    struct state;
    boost::asio::any_io_executor ex_;
    // While entries are armed only the pending wait owns the state, so that an io_context
    // destroyed with armed entries frees them (and their owners) as it would free their own
    // pending waits. While none is, the set keeps it (`idle_`): no state made per cycle.
    std::weak_ptr<state> state_;
    std::shared_ptr<state> idle_;
};

}  // namespace dlock::detail
