// SPDX-License-Identifier: BSL-1.0
#include <dlock/error.hpp>
#include <dlock/redis/subscriber.hpp>

#include "common/channel_table.hpp"
#include "common/post_completion.hpp"
#include "common/stored_handler.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/post.hpp>
#include <boost/container/small_vector.hpp>

#include <map>
#include <span>
#include <unordered_map>
#include <vector>

namespace dlock::redis {

namespace asio = boost::asio;
using boost::system::error_code;
using dlock::detail::post_completion;

struct subscriber::state {
    asio::any_io_executor ex;
    connection* conn = nullptr;
    dlock::detail::channel_table channels;
    std::map<listener_id, std::pair<std::string, listener>> listeners;
    listener_id next_id = 1;

    // Listeners may unlisten (or listen) from inside the callback: `ids` is a copy.
    void tell(std::span<const listener_id> ids, const event& ev)
    {
        for (auto id : ids) {
            auto l = listeners.find(id);
            if (l != listeners.end()) {
                auto cb = l->second.second;  // keep it alive even if it unlistens itself
                cb(ev);
            }
        }
    }

    // A channel has one listener or a few: their ids are copied without allocating, and
    // the message's strings are moved into the event (a grant's way to its waiter).
    void notify(std::string&& channel, event_kind kind, std::string&& payload = {})
    {
        auto view = channels.watchers_view(channel);
        if (view.empty())
            return;
        boost::container::small_vector<listener_id, 4> ids(view.begin(), view.end());
        tell(ids, event{kind, std::move(channel), std::move(payload)});
    }

    void on_push(reply&& r)
    {
        if (r.type != reply_type::array || r.elements.size() < 3)
            return;
        const std::string& kind = r.elements[0].str;
        std::string& channel = r.elements[1].str;
        if (kind == "message") {
            notify(std::move(channel), event_kind::message, std::move(r.elements[2].str));
        } else if (kind == "subscribe") {
            auto c = channels.on_confirm(channel);
            if (c.kind != dlock::detail::channel_table::confirm_kind::none) {
                bool again = c.kind == dlock::detail::channel_table::confirm_kind::resync;
                tell(c.watchers, event{again ? event_kind::resubscribed : event_kind::subscribed, channel, {}});
            }
        }
        // "unsubscribe" confirmations need no action: the channel state is already gone.
    }

    void on_connected()
    {
        if (channels.size() == 0)
            return;
        request req;
        req.push_range("SUBSCRIBE", channels.resubscribe_all());
        conn->send(std::move(req), true);
    }

    void on_disconnected()
    {
        // SUBSCRIBE commands still queued will be re-sent by on_connected.
        for (auto& n : channels.on_disconnect())
            notify(std::move(n), event_kind::disconnected);
    }
};

subscriber::subscriber(asio::any_io_executor ex, config cfg)
    : state_(std::make_shared<state>()), conn_(ex, std::move(cfg))
{
    state_->ex = ex;
    state_->conn = &conn_;
    std::weak_ptr<state> weak = state_;
    conn_.set_push_mode({
        [weak](reply&& r) {
            if (auto s = weak.lock())
                s->on_push(std::move(r));
        },
        [weak] {
            if (auto s = weak.lock())
                s->on_connected();
        },
        [weak](error_code) {
            if (auto s = weak.lock())
                s->on_disconnected();
        },
    });
}

subscriber::~subscriber()
{
    state_->listeners.clear();
    state_->channels = dlock::detail::channel_table();
    conn_.close();
}

asio::any_io_executor subscriber::get_executor() const noexcept
{
    return conn_.get_executor();
}

subscriber::listener_id subscriber::listen(const std::string& channel, listener cb)
{
    auto& s = *state_;
    listener_id id = s.next_id++;
    s.listeners.emplace(id, std::make_pair(channel, std::move(cb)));
    if (s.channels.add(channel, id)) {
        request req;
        req.push("SUBSCRIBE", channel);
        conn_.send(std::move(req));
    } else if (s.channels.is_confirmed(channel)) {
        std::weak_ptr<state> weak = state_;
        asio::post(s.ex, [weak, id, channel] {
            auto self = weak.lock();
            if (!self)
                return;
            auto l = self->listeners.find(id);
            if (l != self->listeners.end()) {
                auto cb = l->second.second;
                cb(event{event_kind::subscribed, channel, {}});
            }
        });
    }
    return id;
}

void subscriber::unlisten(listener_id id)
{
    auto& s = *state_;
    auto l = s.listeners.find(id);
    if (l == s.listeners.end())
        return;
    std::string channel = std::move(l->second.first);
    s.listeners.erase(l);
    if (s.channels.remove(channel, id)) {
        request req;
        req.push("UNSUBSCRIBE", channel);
        conn_.send(std::move(req));
    }
}

bool subscriber::is_subscribed(const std::string& channel) const
{
    return state_->channels.is_confirmed(channel);
}

std::size_t subscriber::channel_count() const noexcept
{
    return state_->channels.size();
}
std::size_t subscriber::listener_count() const noexcept
{
    return state_->listeners.size();
}
void subscriber::close()
{
    conn_.close();
}

// ---- subscription ----

struct subscription::state {
    std::deque<event> events;
    dlock::detail::stored_handler<void(error_code, event)> waiting;
    asio::cancellation_slot slot;
    asio::any_io_executor ex;

    void deliver()
    {
        if (!waiting || events.empty())
            return;
        if (slot.is_connected())
            slot.clear();
        auto h = std::move(waiting);
        event ev = std::move(events.front());
        events.pop_front();
        post_completion(ex, std::move(h), error_code(), std::move(ev));
    }
};

subscription::subscription(subscriber& sub, const std::string& channel) : sub_(sub), state_(std::make_shared<state>())
{
    state_->ex = sub.get_executor();
    std::weak_ptr<state> weak = state_;
    id_ = sub_.listen(channel, [weak](const event& ev) {
        if (auto s = weak.lock()) {
            s->events.push_back(ev);
            s->deliver();
        }
    });
}

subscription::~subscription()
{
    sub_.unlisten(id_);
    if (state_->waiting) {
        auto h = std::move(state_->waiting);
        post_completion(state_->ex, std::move(h), error_code(error::closed), event{});
    }
}

std::size_t subscription::queued() const noexcept
{
    return state_->events.size();
}

void subscription::receive_impl(asio::any_completion_handler<void(error_code, event)> h)
{
    auto& s = *state_;
    if (s.waiting) {
        return post_completion(s.ex, std::move(h), error_code(error::invalid_request), event{});
    }
    s.slot = asio::get_associated_cancellation_slot(h);
    s.waiting = std::move(h);
    if (s.slot.is_connected()) {
        std::weak_ptr<state> weak = state_;
        s.slot.assign([weak](asio::cancellation_type) {
            auto self = weak.lock();
            if (!self || !self->waiting)
                return;
            auto h = std::move(self->waiting);
            post_completion(self->ex, std::move(h), error_code(asio::error::operation_aborted), event{});
        });
    }
    if (!s.events.empty())
        s.deliver();  // posts: never completes inside this call
}

}  // namespace dlock::redis
