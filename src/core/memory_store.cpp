#include <dlock/error.hpp>
#include <dlock/memory_store.hpp>

#include "common/post_completion.hpp"

#include <boost/asio/post.hpp>

#include <algorithm>
#include <deque>
#include <map>
#include <unordered_map>

namespace dlock {

namespace asio = boost::asio;
using boost::system::error_code;
using detail::post_completion;
using clock_type = std::chrono::steady_clock;

struct memory_store::impl : std::enable_shared_from_this<impl> {
    struct lease {
        std::string token;
        std::uint64_t fence = 0;
        clock_type::time_point expires;
        bool contended = false;
    };
    asio::any_io_executor ex;
    std::unordered_map<std::string, lease> leases;
    std::uint64_t fence_counter = 0;  // one counter for all names: monotonic per name too
    watch_id next_watch = 1;
    bool direct = false;
    // Direct hand-off: per name, the queued (token, lease) in order; a token is live while
    // a watch with it exists (as a Redis subscription is while its process lives).
    std::unordered_map<std::string, std::deque<std::pair<std::string, std::chrono::milliseconds>>> queues;
    struct watcher {
        std::string name, token;
        watch_callback cb;
        bool ready = false;  // no release reaches a watch before its ready
    };
    std::map<watch_id, watcher> watchers;

    bool listening(const std::string& name, const std::string& token) const
    {
        for (auto& [id, w] : watchers)
            if (!w.token.empty() && w.name == name && w.token == token)
                return true;
        return false;
    }

    void withdraw(const std::string& name, const std::string& token)
    {
        auto it = queues.find(name);
        if (it == queues.end())
            return;
        std::erase_if(it->second, [&](const auto& e) { return e.first == token; });
        if (it->second.empty())
            queues.erase(it);
    }

    // Later, calls watcher `id` if it still exists then (unwatch() stops even a posted call);
    // the callback is copied first since it may unwatch itself.
    void post_to(watch_id id, watch_event ev, grant_notice g = {})
    {
        std::weak_ptr<impl> weak = shared_from_this();
        asio::post(ex, [weak, id, ev, g] {
            auto self = weak.lock();
            if (!self)
                return;
            auto it = self->watchers.find(id);
            if (it == self->watchers.end())
                return;
            if (ev == watch_event::ready)
                it->second.ready = true;
            auto cb = it->second.cb;
            cb(ev, g);
        });
    }

    void post_grant(const std::string& name, const std::string& token, grant_notice g)
    {
        for (auto& [id, w] : watchers)
            if (w.name == name && w.token == token) {
                post_to(id, watch_event::granted, g);
                return;
            }
    }

    lease* find(const std::string& name)
    {
        auto it = leases.find(name);
        if (it == leases.end())
            return nullptr;
        if (it->second.expires <= clock_type::now()) {
            leases.erase(it);
            return nullptr;
        }
        return &it->second;
    }

    void notify(const std::string& name, watch_event ev)
    {
        for (auto& [id, w] : watchers)
            if (w.name == name && w.ready)
                post_to(id, ev);
    }
};

memory_store::memory_store(asio::any_io_executor ex, bool direct_handoff) : impl_(std::make_shared<impl>())
{
    impl_->ex = std::move(ex);
    impl_->direct = direct_handoff;
}

store_traits memory_store::traits() const noexcept
{
    store_traits t;
    t.direct_handoff = impl_->direct;
    t.durable_fencing = false;  // the counter lives as long as the store object
    return t;
}

std::string memory_store::describe() const { return "memory"; }

std::size_t memory_store::queued(const std::string& name) const
{
    auto it = impl_->queues.find(name);
    return it == impl_->queues.end() ? 0 : it->second.size();
}

memory_store::~memory_store() = default;

asio::any_io_executor memory_store::get_executor() const { return impl_->ex; }

std::size_t memory_store::size() const
{
    std::size_t n = 0;
    for (auto& [name, l] : impl_->leases)
        n += l.expires > clock_type::now();
    return n;
}

void memory_store::expire_now(const std::string& name) { impl_->leases.erase(name); }

void memory_store::do_try_acquire(const lease_request& req, asio::any_completion_handler<acquire_signature> h)
{
    auto& s = *impl_;
    if (req.kind != lease_kind::mutex)
        return post_completion(s.ex, std::move(h), make_error_code(error::not_supported), acquire_result{});
    const auto& name = req.name;
    const auto& token = req.token;
    auto ttl = req.ttl;
    bool queue = req.queue && s.direct;
    acquire_result r;
    auto* l = s.find(name);
    if (!l) {
        auto& n = s.leases[name];
        n = {token, ++s.fence_counter, clock_type::now() + ttl};
        r.acquired = true;
        r.fencing_token = n.fence;
        r.granted_ttl = ttl;
        if (queue)
            s.withdraw(name, token);
    } else if (l->token == token) {
        l->expires = clock_type::now() + ttl;
        r.acquired = true;
        r.fencing_token = l->fence;
        r.granted_ttl = ttl;
    } else {
        l->contended = true;
        r.holder_ttl = std::chrono::duration_cast<std::chrono::milliseconds>(l->expires - clock_type::now());
        if (queue) {
            auto& q = s.queues[name];
            if (std::none_of(q.begin(), q.end(), [&](const auto& e) { return e.first == token; }))
                q.emplace_back(token, ttl);
        }
    }
    post_completion(s.ex, std::move(h), error_code(), r);
}

// The release's second half, as the Redis script does it: the first queued token still
// listening gets the name with a new fencing token; nobody: free it and wake the watchers.
void memory_store::hand_on_or_free(const std::string& name)
{
    auto& s = *impl_;
    auto current = s.leases[name].token;
    auto it = s.queues.find(name);
    while (it != s.queues.end() && !it->second.empty()) {
        auto [token, ttl] = it->second.front();
        it->second.pop_front();
        if (token == current || !s.listening(name, token))
            continue;
        bool more = !it->second.empty();
        if (!more)
            s.queues.erase(it);
        grant_notice g{++s.fence_counter, ttl, {}};
        s.leases[name] = {token, g.fencing_token, clock_type::now() + ttl, more};
        s.post_grant(name, token, g);
        return;
    }
    if (it != s.queues.end())
        s.queues.erase(it);
    s.leases.erase(name);
    s.notify(name, watch_event::released);
}

void memory_store::do_renew(const lease_key& key, std::chrono::milliseconds ttl,
                            asio::any_completion_handler<renew_signature> h)
{
    auto& s = *impl_;
    const auto& name = key.name;
    const auto& token = key.token;
    auto* l = s.find(name);
    renew_result r;
    r.owned = l && l->token == token;
    if (r.owned) {
        l->expires = clock_type::now() + ttl;
        r.contended = std::exchange(l->contended, false);
    }
    post_completion(s.ex, std::move(h), error_code(), r);
}

void memory_store::do_release(const lease_key& key, asio::any_completion_handler<bool_signature> h)
{
    auto& s = *impl_;
    const auto& name = key.name;
    const auto& token = key.token;
    auto* l = s.find(name);
    bool owned = l && l->token == token;
    if (owned)
        hand_on_or_free(name);
    else
        s.withdraw(name, token);
    post_completion(s.ex, std::move(h), error_code(), owned);
}

void memory_store::do_force_release(const std::string& name, asio::any_completion_handler<bool_signature> h)
{
    auto& s = *impl_;
    bool held = s.find(name) != nullptr;
    if (held)
        hand_on_or_free(name);
    else
        s.notify(name, watch_event::released);
    post_completion(s.ex, std::move(h), error_code(), held);
}

void memory_store::do_status(const std::string& name, asio::any_completion_handler<status_signature> h)
{
    auto& s = *impl_;
    lock_status st;
    st.key = name;
    st.last_fencing_token = s.fence_counter;
    if (auto q = s.queues.find(name); q != s.queues.end())
        st.queued = q->second.size();
    if (auto* l = s.find(name)) {
        st.held = true;
        st.ttl = std::chrono::duration_cast<std::chrono::milliseconds>(l->expires - clock_type::now());
        st.fencing_token = l->fence;
        st.holder = l->token;
    }
    post_completion(s.ex, std::move(h), error_code(), std::move(st));
}

store::watch_id memory_store::watch(const std::string& name, const std::string& token, watch_callback cb)
{
    auto& s = *impl_;
    watch_id id = s.next_watch++;
    s.watchers.emplace(id, impl::watcher{name, token, std::move(cb)});
    s.post_to(id, watch_event::ready);
    return id;
}

void memory_store::unwatch(watch_id id) { impl_->watchers.erase(id); }

}  // namespace dlock
