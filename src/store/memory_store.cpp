#include <dlock/error.hpp>
#include <dlock/memory_store.hpp>

#include "detail/post_completion.hpp"

#include <boost/asio/post.hpp>

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
    std::map<watch_id, std::pair<std::string, std::function<void(watch_event)>>> watchers;
    watch_id next_watch = 1;

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
        std::weak_ptr<impl> weak = shared_from_this();
        asio::post(ex, [weak, name, ev] {
            auto self = weak.lock();
            if (!self)
                return;
            std::vector<watch_id> ids;
            for (auto& [id, w] : self->watchers)
                if (w.first == name)
                    ids.push_back(id);
            for (auto id : ids) {
                auto it = self->watchers.find(id);
                if (it != self->watchers.end()) {
                    auto cb = it->second.second;
                    cb(ev);
                }
            }
        });
    }
};

memory_store::memory_store(asio::any_io_executor ex) : impl_(std::make_shared<impl>())
{
    impl_->ex = std::move(ex);
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

void memory_store::do_try_acquire(const std::string& name, const std::string& token, std::chrono::milliseconds ttl,
                                  asio::any_completion_handler<acquire_signature> h)
{
    auto& s = *impl_;
    acquire_result r;
    auto* l = s.find(name);
    if (!l) {
        auto& n = s.leases[name];
        n = {token, ++s.fence_counter, clock_type::now() + ttl};
        r = {true, n.fence, ttl};
    } else if (l->token == token) {
        l->expires = clock_type::now() + ttl;
        r = {true, l->fence, ttl};
    } else {
        l->contended = true;
        r.holder_ttl = std::chrono::duration_cast<std::chrono::milliseconds>(l->expires - clock_type::now());
    }
    post_completion(s.ex, std::move(h), error_code(), r);
}

void memory_store::do_renew(const std::string& name, const std::string& token, std::chrono::milliseconds ttl,
                            asio::any_completion_handler<renew_signature> h)
{
    auto& s = *impl_;
    auto* l = s.find(name);
    renew_result r;
    r.owned = l && l->token == token;
    if (r.owned) {
        l->expires = clock_type::now() + ttl;
        r.contended = std::exchange(l->contended, false);
    }
    post_completion(s.ex, std::move(h), error_code(), r);
}

void memory_store::do_release(const std::string& name, const std::string& token,
                              asio::any_completion_handler<bool_signature> h)
{
    auto& s = *impl_;
    auto* l = s.find(name);
    bool owned = l && l->token == token;
    if (owned) {
        s.leases.erase(name);
        s.notify(name, watch_event::released);
    }
    post_completion(s.ex, std::move(h), error_code(), owned);
}

void memory_store::do_force_release(const std::string& name, asio::any_completion_handler<bool_signature> h)
{
    auto& s = *impl_;
    bool held = s.find(name) != nullptr;
    s.leases.erase(name);
    s.notify(name, watch_event::released);
    post_completion(s.ex, std::move(h), error_code(), held);
}

void memory_store::do_status(const std::string& name, asio::any_completion_handler<status_signature> h)
{
    auto& s = *impl_;
    lock_status st;
    st.last_fencing_token = s.fence_counter;
    if (auto* l = s.find(name)) {
        st.held = true;
        st.ttl = std::chrono::duration_cast<std::chrono::milliseconds>(l->expires - clock_type::now());
        st.fencing_token = l->fence;
        st.holder = l->token;
    }
    post_completion(s.ex, std::move(h), error_code(), std::move(st));
}

store::watch_id memory_store::watch(const std::string& name, std::function<void(watch_event)> cb)
{
    auto& s = *impl_;
    watch_id id = s.next_watch++;
    s.watchers.emplace(id, std::make_pair(name, std::move(cb)));
    std::weak_ptr<impl> weak = impl_;
    asio::post(s.ex, [weak, id] {
        auto self = weak.lock();
        if (!self)
            return;
        auto it = self->watchers.find(id);
        if (it != self->watchers.end()) {
            auto cb = it->second.second;
            cb(watch_event::ready);
        }
    });
    return id;
}

void memory_store::unwatch(watch_id id) { impl_->watchers.erase(id); }

}  // namespace dlock
