#include <dlock/error.hpp>
#include <dlock/redis/subscriber.hpp>

#include "common/post_completion.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/post.hpp>

#include <map>
#include <unordered_map>
#include <vector>

namespace dlock::redis {

namespace asio = boost::asio;
using dlock::detail::post_completion;
using boost::system::error_code;

struct subscriber::state {
    struct channel_state {
        std::vector<listener_id> listeners;
        int pending_subscribes = 0;  // SUBSCRIBEs sent whose confirmation has not arrived
        bool confirmed = false;
        bool resubscribing = false;
    };
    asio::any_io_executor ex;
    connection* conn = nullptr;
    std::unordered_map<std::string, channel_state> channels;
    std::map<listener_id, std::pair<std::string, listener>> listeners;
    listener_id next_id = 1;

    void notify(const std::string& channel, event_kind kind, const std::string& payload = {})
    {
        auto it = channels.find(channel);
        if (it == channels.end())
            return;
        // Listeners may unlisten (or listen) from inside the callback: iterate over a copy.
        auto ids = it->second.listeners;
        event ev{kind, channel, payload};
        for (auto id : ids) {
            auto l = listeners.find(id);
            if (l != listeners.end()) {
                auto cb = l->second.second;  // keep it alive even if it unlistens itself
                cb(ev);
            }
        }
    }

    void on_push(reply&& r)
    {
        if (r.type != reply_type::array || r.elements.size() < 3)
            return;
        const std::string& kind = r.elements[0].str;
        const std::string& channel = r.elements[1].str;
        if (kind == "message") {
            notify(channel, event_kind::message, r.elements[2].str);
        } else if (kind == "subscribe") {
            auto it = channels.find(channel);
            if (it == channels.end())
                return;
            auto& ch = it->second;
            if (ch.pending_subscribes > 0)
                --ch.pending_subscribes;
            if (ch.pending_subscribes == 0 && !ch.confirmed) {
                ch.confirmed = true;
                bool again = ch.resubscribing;
                ch.resubscribing = false;
                notify(channel, again ? event_kind::resubscribed : event_kind::subscribed);
            }
        }
        // "unsubscribe" confirmations need no action: the channel state is already gone.
    }

    void on_connected()
    {
        if (channels.empty())
            return;
        std::vector<std::string> names;
        for (auto& [name, ch] : channels) {
            names.push_back(name);
            ch.pending_subscribes = 1;
            ch.confirmed = false;
        }
        request req;
        req.push_range("SUBSCRIBE", names);
        conn->send(req, true);
    }

    void on_disconnected()
    {
        std::vector<std::string> names;
        for (auto& [name, ch] : channels) {
            // Only a channel that was confirmed is "re"-subscribed later; one listened to
            // before the first connection (or never confirmed) just becomes subscribed.
            ch.resubscribing = ch.resubscribing || ch.confirmed;
            ch.confirmed = false;
            ch.pending_subscribes = 0;
            // SUBSCRIBE commands still queued will be re-sent by on_connected.
            names.push_back(name);
        }
        for (auto& n : names)
            notify(n, event_kind::disconnected);
    }
};

subscriber::subscriber(asio::any_io_executor ex, config cfg)
    : state_(std::make_shared<state>()), conn_(ex, std::move(cfg))
{
    state_->ex = ex;
    state_->conn = &conn_;
    std::weak_ptr<state> weak = state_;
    conn_.set_push_mode({
        [weak](reply&& r) { if (auto s = weak.lock()) s->on_push(std::move(r)); },
        [weak] { if (auto s = weak.lock()) s->on_connected(); },
        [weak](error_code) { if (auto s = weak.lock()) s->on_disconnected(); },
    });
}

subscriber::~subscriber()
{
    state_->listeners.clear();
    state_->channels.clear();
    conn_.close();
}

asio::any_io_executor subscriber::get_executor() const noexcept { return conn_.get_executor(); }

subscriber::listener_id subscriber::listen(const std::string& channel, listener cb)
{
    auto& s = *state_;
    listener_id id = s.next_id++;
    s.listeners.emplace(id, std::make_pair(channel, std::move(cb)));
    auto [it, inserted] = s.channels.try_emplace(channel);
    auto& ch = it->second;
    ch.listeners.push_back(id);
    if (inserted) {
        ch.pending_subscribes = 1;
        request req;
        req.push("SUBSCRIBE", channel);
        conn_.send(req);
    } else if (ch.confirmed) {
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
    auto it = s.channels.find(channel);
    if (it == s.channels.end())
        return;
    std::erase(it->second.listeners, id);
    if (it->second.listeners.empty()) {
        s.channels.erase(it);
        request req;
        req.push("UNSUBSCRIBE", channel);
        conn_.send(req);
    }
}

bool subscriber::is_subscribed(const std::string& channel) const
{
    auto it = state_->channels.find(channel);
    return it != state_->channels.end() && it->second.confirmed;
}

std::size_t subscriber::channel_count() const noexcept { return state_->channels.size(); }
std::size_t subscriber::listener_count() const noexcept { return state_->listeners.size(); }
void subscriber::close() { conn_.close(); }

// ---- subscription ----

struct subscription::state {
    std::deque<event> events;
    asio::any_completion_handler<void(error_code, event)> waiting;
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

subscription::subscription(subscriber& sub, const std::string& channel)
    : sub_(sub), state_(std::make_shared<state>())
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

std::size_t subscription::queued() const noexcept { return state_->events.size(); }

void subscription::receive_impl(asio::any_completion_handler<void(error_code, event)> h)
{
    auto& s = *state_;
    if (s.waiting) {
                return post_completion(s.ex, std::move(h), error_code(error::invalid_request), event{});
    }
    s.slot = asio::get_associated_cancellation_slot(h);
    dlock::detail::assign_handler(s.waiting, std::move(h));
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
