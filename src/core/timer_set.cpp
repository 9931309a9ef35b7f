// SPDX-License-Identifier: BSL-1.0
#include "core/timer_set.hpp"

#include <boost/asio/steady_timer.hpp>

namespace dlock::detail {

namespace asio = boost::asio;
namespace bi = boost::intrusive;
using clock = timer_entry::clock;

namespace {

struct by_due {
    bool operator()(const timer_entry& a, const timer_entry& b) const noexcept { return a.due < b.due; }
};

}  // namespace

struct timer_set::state : std::enable_shared_from_this<state> {
    explicit state(asio::any_io_executor ex) : timer(std::move(ex)) {}

    ~state()
    {
        // Only when the io_context drops the pending wait: release every owner, unlinked first.
        while (!entries.empty()) {
            auto& e = *entries.begin();
            entries.erase(entries.begin());
            auto owner = std::move(e.owner);
        }
    }

    // Waits for the earliest entry, unless the pending wait already comes no later.
    void wait_for_first()
    {
        if (entries.empty()) {
            if (waiting) {
                waiting = false;
                ++generation;
                timer.cancel();  // nothing left: the io_context may run out of work
            }
            return;
        }
        auto first = entries.begin()->due;
        if (waiting && first >= waiting_for)
            return;
        waiting = true;
        waiting_for = first;
        timer.expires_at(first);
        timer.async_wait([self = shared_from_this(), gen = ++generation](boost::system::error_code ec) {
            if (!ec && gen == self->generation)
                self->fire();
        });
    }

    void fire()
    {
        waiting = false;
        auto keep = shared_from_this();  // an owner's callback may drop the last wait
        auto now = clock::now();
        // Only the entries due when the wait ended: one that its callback re-arms for now (or
        // earlier) waits for the next pass, so I/O runs in between, as with a timer of its own.
        std::size_t due = 0;
        for (auto it = entries.begin(); it != entries.end() && it->due <= now; ++it)
            ++due;
        try {
            for (; due > 0 && !entries.empty() && entries.begin()->due <= now; --due) {
                auto& e = *entries.begin();
                entries.erase(entries.begin());
                auto owner = std::move(e.owner);
                e.on_due(e, std::move(owner));
            }
        } catch (...) {
            // A callback ran user code that threw (it leaves io_context::run): the other
            // entries keep their wait, or they would never fire (a lease no longer renewed).
            wait_for_first();
            throw;
        }
        wait_for_first();
    }

    asio::steady_timer timer;
    bi::multiset<timer_entry, bi::compare<by_due>> entries;
    bool waiting = false;
    clock::time_point waiting_for{};
    std::uint64_t generation = 0;
};

timer_set::~timer_set() = default;

void timer_set::arm(timer_entry& e, clock::time_point due, std::shared_ptr<void> owner)
{
    auto s = state_.lock();
    if (!s) {
        s = std::make_shared<state>(ex_);
        state_ = s;
    }
    idle_.reset();  // from now on the wait owns it
    if (e.is_linked())
        s->entries.erase(s->entries.iterator_to(e));
    e.due = due;
    e.owner = std::move(owner);
    s->entries.insert(e);
    s->wait_for_first();
}

std::shared_ptr<void> timer_set::disarm(timer_entry& e) noexcept
{
    if (!e.is_linked())
        return nullptr;
    auto s = state_.lock();
    if (!s)
        return std::move(e.owner);  // cannot happen: a linked entry's state is alive
    s->entries.erase(s->entries.iterator_to(e));
    auto owner = std::move(e.owner);
    s->wait_for_first();
    if (s->entries.empty())
        idle_ = std::move(s);  // no owner in it: keeping it makes no cycle
    return owner;
}

}  // namespace dlock::detail
