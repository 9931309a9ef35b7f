// SPDX-License-Identifier: BSL-1.0
#include <dlock/error.hpp>
#include <dlock/memory_store.hpp>

#include "common/lease_checks.hpp"
#include "common/post_completion.hpp"
#include "core/kind_text.hpp"
#include "core/lease_policy.hpp"
#include "core/lease_set.hpp"

#include <boost/asio/post.hpp>

#include <algorithm>
#include <deque>
#include <map>
#include <set>
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
    struct watcher {
        std::string name, token;  // token: empty unless the watcher takes hand-offs
        watch_callback cb;
    };
    asio::any_io_executor ex;
    std::unordered_map<std::string, lease> leases;
    std::uint64_t fence_counter = 0;  // one counter for all names: monotonic per name too
    std::map<watch_id, watcher> watchers;
    watch_id next_watch = 1;
    bool direct = false;
    // Direct hand-off: per name, the queued (token, lease) in order; a token is live while
    // a watcher for it exists (as a Redis subscription is while its process lives).
    std::unordered_map<std::string, std::deque<std::pair<std::string, std::chrono::milliseconds>>> queues;
    // Read-write locks and semaphores, by name.
    std::unordered_map<std::string, detail::lease_set> sets;
    // Count-down latches: the count, the members counted so far, the expiry.
    struct latch {
        std::uint64_t count = 0;
        std::set<std::string> members;
        clock_type::time_point expires;
    };
    std::unordered_map<std::string, latch> latches;
    // Elections: per name, the value proclaimed and the fencing token of the lease it goes
    // with (a value of an earlier lease is stale).
    std::unordered_map<std::string, std::pair<std::uint64_t, std::string>> values;
    error_code fail_ec;
    std::string fail_text;
    unsigned fail_count = 0;

    bool listening(const std::string& name, const std::string& token) const
    {
        return std::any_of(watchers.begin(), watchers.end(),
                           [&](auto& w) { return w.second.name == name && w.second.token == token; });
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

    // Later, calls watcher `id` if it still exists then (a callback may unwatch itself or
    // others: each is looked up afresh).
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
            auto cb = it->second.cb;
            cb(ev, g);
        });
    }

    void notify(const std::string& name, watch_event ev)
    {
        for (auto& [id, w] : watchers)
            if (w.name == name)
                post_to(id, ev);
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

    detail::lease_set::live_fn live_in(const std::string& name)
    {
        return [this, name](const std::string& token) { return listening(name, token); };
    }
    detail::lease_set::grant_fn grant_in(const std::string& name)
    {
        return [this, name](const std::string& token, const grant_notice& g) {
            for (auto& [id, w] : watchers)
                if (w.name == name && w.token == token) {
                    post_to(id, watch_event::granted, g);
                    break;
                }
        };
    }
    // A set that holds nothing and queues nobody is forgotten (its kind and size with it).
    void tidy(const std::string& name)
    {
        if (auto it = sets.find(name); it != sets.end() && it->second.empty(clock_type::now()))
            sets.erase(it);
    }

    // The name as a mutex: held, or queued for by a waiter still watching (as the Redis
    // scripts see the lock hash or the mutex queue).
    bool mutex_in_use(const std::string& name)
    {
        if (find(name))
            return true;
        auto q = queues.find(name);
        return q != queues.end() &&
               std::any_of(q->second.begin(), q->second.end(), [&](auto& e) { return listening(name, e.first); });
    }
    // The name as a read-write lock or a semaphore, holding or queueing anyone (an idle set
    // is forgotten here).
    detail::lease_set* set_in_use(const std::string& name)
    {
        tidy(name);
        auto it = sets.find(name);
        return it == sets.end() ? nullptr : &it->second;
    }

    // An injected failure, if one is armed.
    bool fail(error_code& ec)
    {
        if (fail_count == 0)
            return false;
        --fail_count;
        ec = fail_ec;
        return true;
    }
};

memory_store::memory_store(asio::any_io_executor ex, bool direct_handoff) : impl_(std::make_shared<impl>())
{
    impl_->ex = std::move(ex);
    impl_->direct = direct_handoff;
}

memory_store::~memory_store() = default;

store_traits memory_store::traits() const noexcept
{
    store_traits t;
    t.direct_handoff = impl_->direct;
    t.kinds = static_cast<unsigned>(lease_kind::mutex) | static_cast<unsigned>(lease_kind::read) |
              static_cast<unsigned>(lease_kind::write) | static_cast<unsigned>(lease_kind::permit);
    t.durable_fencing = false;  // a process's memory
    t.max_ttl = detail::max_lease;
    return t;
}

latch_capability* memory_store::latches() noexcept
{
    return this;
}

election_capability* memory_store::elections() noexcept
{
    return this;
}

std::string memory_store::describe() const
{
    return impl_->direct ? "memory (direct hand-off)" : "memory";
}

std::size_t memory_store::queued(const std::string& name) const
{
    auto it = impl_->queues.find(name);
    auto set = impl_->sets.find(name);
    return (it == impl_->queues.end() ? 0 : it->second.size()) + (set == impl_->sets.end() ? 0 : set->second.queued());
}

void memory_store::fail_next(error_code ec, std::string text, unsigned count)
{
    impl_->fail_ec = ec;
    impl_->fail_text = std::move(text);
    impl_->fail_count = count;
}

asio::any_io_executor memory_store::get_executor() const
{
    return impl_->ex;
}

std::size_t memory_store::size() const
{
    std::size_t n = 0;
    for (auto& [name, l] : impl_->leases)
        n += l.expires > clock_type::now();
    return n;
}

void memory_store::expire_now(const std::string& name)
{
    impl_->leases.erase(name);
}

void memory_store::do_try_acquire(const lease_request& req, asio::any_completion_handler<acquire_signature> h)
{
    auto& s = *impl_;
    acquire_result r;
    error_code ec;
    if (req.ttl.count() <= 0 || req.ttl > detail::max_lease) {
        ec = error::invalid_lease;
    } else if (s.fail(ec)) {
        set_error_text(s.fail_text);
    } else if (req.kind != lease_kind::mutex) {
        s.tidy(req.name);  // a set whose leases all ended is no longer what the name is
        auto it = s.sets.find(req.name);
        if (req.kind == lease_kind::permit && req.capacity == 0) {
            ec = error::invalid_option;  // a semaphore of nothing
        } else if (s.mutex_in_use(req.name)) {
            ec = error::kind_mismatch;
            set_error_text(detail::kind_in_use_text(lease_kind::mutex));
        } else if (it == s.sets.end()) {
            it = s.sets.emplace(req.name, detail::lease_set(req.kind, req.capacity)).first;
        }
        if (!ec) {
            ec = it->second.check(req);
            if (ec)
                set_error_text(detail::kind_in_use_text(it->second.kind(), it->second.capacity()));
        }
        if (!ec) {
            auto q = req;
            q.queue = req.queue && s.direct;
            r = it->second.acquire(q, clock_type::now(), s.fence_counter, s.live_in(req.name), s.grant_in(req.name));
        }
        s.tidy(req.name);
    } else if (auto* set = s.set_in_use(req.name)) {
        ec = error::kind_mismatch;  // a read-write lock's or a semaphore's name
        set_error_text(detail::kind_in_use_text(set->kind(), set->capacity()));
    } else if (auto* l = s.find(req.name); !l) {
        auto& n = s.leases[req.name];
        n = {req.token, ++s.fence_counter, clock_type::now() + req.ttl};
        r = {true, n.fence, req.ttl};
        s.withdraw(req.name, req.token);
    } else if (l->token == req.token) {
        l->expires = clock_type::now() + req.ttl;
        r = {true, l->fence, req.ttl};
    } else {
        l->contended = true;
        r.holder_ttl = std::chrono::duration_cast<std::chrono::milliseconds>(l->expires - clock_type::now());
        if (req.queue && s.direct) {
            auto& q = s.queues[req.name];
            if (std::none_of(q.begin(), q.end(), [&](const auto& e) { return e.first == req.token; }))
                q.emplace_back(req.token, req.ttl);
        }
    }
    post_completion(s.ex, std::move(h), ec, r);
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
        for (auto& [id, w] : s.watchers)
            if (w.name == name && w.token == token) {
                s.post_to(id, watch_event::granted, g);
                break;
            }
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
    renew_result r;
    error_code ec;
    if (s.fail(ec)) {
        set_error_text(s.fail_text);
    } else if (key.kind != lease_kind::mutex) {
        if (auto it = s.sets.find(key.name); it != s.sets.end())
            r = it->second.renew(key.token, ttl, clock_type::now());
    } else if (auto* l = s.find(key.name); l && l->token == key.token) {
        r.owned = true;
        l->expires = clock_type::now() + ttl;
        r.contended = std::exchange(l->contended, false);
    }
    post_completion(s.ex, std::move(h), ec, r);
}

void memory_store::do_release(const lease_key& key, asio::any_completion_handler<bool_signature> h)
{
    auto& s = *impl_;
    error_code ec;
    bool owned = false;
    if (s.fail(ec)) {
        set_error_text(s.fail_text);
    } else if (key.kind != lease_kind::mutex) {
        if (auto it = s.sets.find(key.name); it != s.sets.end()) {
            bool wake = false;
            owned = it->second.release(key.token, clock_type::now(), s.fence_counter, s.live_in(key.name),
                                       s.grant_in(key.name), wake);
            if (wake)
                s.notify(key.name, watch_event::released);
            s.tidy(key.name);
        }
    } else {
        auto* l = s.find(key.name);
        owned = l && l->token == key.token;
        if (owned)
            hand_on_or_free(key.name);
        else
            s.withdraw(key.name, key.token);
    }
    post_completion(s.ex, std::move(h), ec, owned);
}

void memory_store::do_force_release(const std::string& name, lease_kind side,
                                    asio::any_completion_handler<bool_signature> h)
{
    auto& s = *impl_;
    if (auto it = s.sets.find(name); it != s.sets.end()) {
        bool held =
            it->second.force_release(side, clock_type::now(), s.fence_counter, s.live_in(name), s.grant_in(name));
        s.notify(name, watch_event::released);
        s.tidy(name);
        return post_completion(s.ex, std::move(h), error_code(), held);
    }
    if (side == lease_kind::read || side == lease_kind::write)  // a mutex has no sides
        return post_completion(s.ex, std::move(h), error_code(), false);
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
    if (auto it = s.sets.find(name); it != s.sets.end())
        st = it->second.status(clock_type::now());
    st.key = name;
    st.last_fencing_token = s.fence_counter;
    if (auto q = s.queues.find(name); q != s.queues.end())
        st.queued += q->second.size();
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

void memory_store::unwatch(watch_id id)
{
    impl_->watchers.erase(id);
}

// ---- count-down latch: the Redis scripts' semantics, in memory ----

std::size_t memory_store::watch_count() const
{
    return impl_->watchers.size();
}

void memory_store::do_count_down(const std::string& name, const std::string& member, std::uint64_t count,
                                 std::chrono::milliseconds ttl, asio::any_completion_handler<count_down_signature> h)
{
    auto& s = *impl_;
    error_code ec;
    std::uint64_t remaining = 0;
    auto now = clock_type::now();
    if ((ec = detail::count_down_refusal(count, member))) {
    } else if (ttl.count() <= 0 || ttl > detail::max_lease) {
        ec = error::invalid_lease;
    } else if (s.fail(ec)) {
        set_error_text(s.fail_text);
    } else {
        auto it = s.latches.find(name);
        if (it != s.latches.end() && it->second.expires <= now)
            s.latches.erase(it), it = s.latches.end();
        if (it != s.latches.end() && it->second.count != count) {
            ec = error::count_mismatch;
        } else {
            auto& l = it != s.latches.end() ? it->second : s.latches[name];
            l.count = count;
            l.expires = now + ttl;
            // Never more members than the count: a done latch stays done and stays small.
            if (l.members.size() < count && l.members.insert(member).second && l.members.size() == count)
                s.notify(name, watch_event::released);
            remaining = count - l.members.size();
        }
    }
    post_completion(s.ex, std::move(h), ec, remaining);
}

void memory_store::do_latch_state(const std::string& name, asio::any_completion_handler<latch_state_signature> h)
{
    auto& s = *impl_;
    latch_state st;
    error_code ec;
    if (s.fail(ec)) {
        set_error_text(s.fail_text);
    } else if (auto it = s.latches.find(name); it != s.latches.end() && it->second.expires > clock_type::now()) {
        st.count = it->second.count;
        st.remaining = st.count - it->second.members.size();
    }
    post_completion(s.ex, std::move(h), ec, st);
}

// ---- elections: a value stored with the lease, as the Redis proclaim script does ----

void memory_store::do_proclaim(const lease_key& key, const std::string& value,
                               asio::any_completion_handler<proclaim_signature> h)
{
    auto& s = *impl_;
    error_code ec;
    bool owned = false;
    if (s.fail(ec)) {
        set_error_text(s.fail_text);
    } else if (auto* l = s.find(key.name); l && l->token == key.token) {
        owned = true;
        s.values[key.name] = {l->fence, value};
        s.notify(key.name, watch_event::released);
    }
    post_completion(s.ex, std::move(h), ec, owned);
}

void memory_store::do_leader(const std::string& name, asio::any_completion_handler<leader_signature> h)
{
    auto& s = *impl_;
    lock_status st;
    error_code ec;
    st.key = name;
    st.last_fencing_token = s.fence_counter;
    if (s.fail(ec)) {
        set_error_text(s.fail_text);
    } else if (auto* l = s.find(name)) {
        st.held = true;
        st.ttl = std::chrono::duration_cast<std::chrono::milliseconds>(l->expires - clock_type::now());
        st.fencing_token = l->fence;
        st.holder = l->token;
        if (auto v = s.values.find(name); v != s.values.end() && v->second.first == l->fence)
            st.value = v->second.second;
    }
    post_completion(s.ex, std::move(h), ec, std::move(st));
}

}  // namespace dlock
