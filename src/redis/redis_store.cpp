#include <dlock/error.hpp>
#include <dlock/redis/store.hpp>

#include "common/post_completion.hpp"
#include "redis/redis_scripts.hpp"
#include "redis/script_replies.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>

#include <array>
#include <span>
#include <sstream>
#include <memory>
#include <vector>

namespace dlock {

namespace asio = boost::asio;
using boost::system::error_code;
using detail::post_completion;
using redis::reply;
using redis::reply_type;

struct redis_store::impl {
    impl(asio::any_io_executor e, redis::config cfg, redis_store_options o)
        : ex(e), conn(e, cfg), sub(e, cfg), ns(std::move(o.ns)), wait_replicas(o.wait_replicas),
          wait_timeout(std::max(o.wait_timeout, std::chrono::milliseconds(1)))
    {
        if (!cfg.sentinel.master_name.empty())
            watch_sentinels(cfg);
    }

    // Every sentinel announces a failover on +switch-master: reconnect at once rather than
    // keep writing to a demoted master until it refuses (READONLY) seconds later.
    void watch_sentinels(const redis::config& cfg)
    {
        for (const auto& node : cfg.sentinel.nodes) {
            redis::config sc = cfg;
            sc.sentinel = {};
            sc.host = node.host;
            sc.port = node.port;
            sc.username = cfg.sentinel.username;
            sc.password = cfg.sentinel.password;
            sc.database = 0;
            sc.client_name.clear();
            auto& s = sentinel_watchers.emplace_back(std::make_unique<redis::subscriber>(ex, sc));
            s->listen("+switch-master", [this, prefix = cfg.sentinel.master_name + " "](const redis::event& ev) {
                if (ev.kind == redis::event_kind::message && ev.payload.rfind(prefix, 0) == 0)
                    on_switch(ev.payload.substr(prefix.size()));
            });
        }
    }
    asio::any_io_executor ex;
    redis::connection conn;
    redis::subscriber sub;
    std::string ns;
    int wait_replicas;
    std::chrono::milliseconds wait_timeout;
    std::vector<std::unique_ptr<redis::subscriber>> sentinel_watchers;

    // "<old ip> <old port> <new ip> <new port>": every sentinel announces it, so reconnect
    // only a connection that is not already on the new master.
    void on_switch(const std::string& rest)
    {
        std::istringstream in(rest);
        std::string old_ip, new_ip;
        unsigned old_port = 0, new_port = 0;
        if (!(in >> old_ip >> old_port >> new_ip >> new_port))
            return;
        auto elsewhere = [&](const auto& c) {
            return c.get_config().host != new_ip || c.get_config().port != new_port || !c.is_connected();
        };
        if (elsewhere(conn))
            conn.reconnect();
        if (elsewhere(sub))
            sub.reconnect();
    }
    redis::script acquire{scripts::acquire};
    redis::script renew{scripts::renew};
    redis::script release{scripts::release};
    redis::script status{scripts::status};

    std::string prefix(const std::string& name) const
    {
        return "{" + slot_tag(key_slot(name)) + "}" + ns;
    }
};

redis_store::redis_store(asio::any_io_executor ex, redis::config cfg, std::string ns)
    : redis_store(std::move(ex), std::move(cfg), redis_store_options{.ns = std::move(ns)})
{
}

redis_store::redis_store(asio::any_io_executor ex, redis::config cfg, redis_store_options opts)
    : impl_(std::make_unique<impl>(ex, std::move(cfg), std::move(opts)))
{
}

redis_store::~redis_store() = default;

asio::any_io_executor redis_store::get_executor() const { return impl_->ex; }
redis::connection& redis_store::connection() noexcept { return impl_->conn; }
redis::subscriber& redis_store::subscriber() noexcept { return impl_->sub; }

void redis_store::close()
{
    impl_->conn.close();
    impl_->sub.close();
    for (auto& s : impl_->sentinel_watchers)
        s->close();
}

namespace {

// The key names of one lock name, from one slot computation.
struct key_set {
    key_set(const std::string& prefix, const std::string& name)
        : lock(prefix + ":lock:" + name), fence(prefix + ":fence"), channel(prefix + ":released:" + name)
    {
    }
    std::string lock, fence, channel;
    static std::string queue(const std::string& prefix, const std::string& name) { return prefix + ":queue:" + name; }
    static std::string queue_ttls(const std::string& prefix, const std::string& name)
    {
        return prefix + ":queue-ttl:" + name;
    }
    static std::string grants(const std::string& prefix, const std::string& name)
    {
        return prefix + ":granted:" + name + ":";
    }
};

}  // namespace

std::string redis_store::lock_key(const std::string& name) const { return impl_->prefix(name) + ":lock:" + name; }
std::string redis_store::fence_key(const std::string& name) const { return impl_->prefix(name) + ":fence"; }
std::string redis_store::channel(const std::string& name) const { return impl_->prefix(name) + ":released:" + name; }
std::string redis_store::queue_key(const std::string& name) const { return key_set::queue(impl_->prefix(name), name); }
std::string redis_store::queue_ttl_key(const std::string& name) const
{
    return key_set::queue_ttls(impl_->prefix(name), name);
}
std::string redis_store::grant_channel(const std::string& name, const std::string& token) const
{
    return key_set::grants(impl_->prefix(name), name) + token;
}

namespace {

using detail::as_int;

// The completion for a script answering one integer: `map` turns it into the result, and
// the caller's cancellation slot follows the request.
template <class Signature, class Map>
auto on_integer(asio::any_completion_handler<Signature> h, Map map)
{
    auto slot = asio::get_associated_cancellation_slot(h);
    return asio::bind_cancellation_slot(slot, [h = std::move(h), map](error_code ec, reply r) mutable {
        long long v = 0;
        if (!ec && !as_int(r, v))
            ec = error::invalid_request;
        std::move(h)(ec, map(v));
    });
}

}  // namespace

void redis_store::do_try_acquire(const std::string& name, const std::string& token, std::chrono::milliseconds ttl,
                                 asio::any_completion_handler<acquire_signature> h)
{
    attempt(name, token, ttl, false, std::move(h));
}

void redis_store::do_try_acquire_queued(const std::string& name, const std::string& token,
                                        std::chrono::milliseconds ttl, asio::any_completion_handler<acquire_signature> h)
{
    attempt(name, token, ttl, direct_handoff(), std::move(h));
}

void redis_store::attempt(const std::string& name, const std::string& token, std::chrono::milliseconds ttl, bool queue,
                          asio::any_completion_handler<acquire_signature> h)
{
    auto prefix = impl_->prefix(name);
    key_set k(prefix, name);
    std::array<std::string, 4> all_keys{std::move(k.lock), std::move(k.fence)};
    std::array<std::string, 3> all_args{token, std::to_string(ttl.count())};
    if (queue) {
        all_keys[2] = key_set::queue(prefix, name);
        all_keys[3] = key_set::queue_ttls(prefix, name);
        all_args[2].push_back('1');
    }
    std::span<const std::string> keys(all_keys.data(), queue ? 4 : 2);
    std::span<const std::string> args(all_args.data(), queue ? 3 : 2);
    auto slot = asio::get_associated_cancellation_slot(h);
    // Decodes the script's reply, then hands the result to `next`.
    auto eval = [&](auto next) {
        impl_->conn.async_eval(impl_->acquire, keys, args,
                               asio::bind_cancellation_slot(slot, [next = std::move(next), ttl](error_code ec, reply r) mutable {
                                   acquire_result out;
                                   if (!ec)
                                       ec = detail::decode_acquire(r, ttl, out);
                                   std::move(next)(ec, out);
                               }));
    };
    if (impl_->wait_replicas <= 0)
        return eval(std::move(h));
    // Then WAIT on the same connection: it covers every write this client made before it.
    eval([this, alive = lifetime(), name, token, h = std::move(h)](error_code ec, acquire_result out) mutable {
        if (ec || !out.acquired || alive.expired())
            return std::move(h)(ec, out);
        redis::request req;
        req.push("WAIT", impl_->wait_replicas, impl_->wait_timeout.count());
        impl_->conn.async_exec(req, [this, alive, name, token, out, h = std::move(h)](error_code ec,
                                                                                    redis::response r) mutable {
            long long acked = 0;
            if (!ec && !(r.size() == 1 && as_int(r[0], acked)))
                ec = error::invalid_request;
            if (!ec && acked < impl_->wait_replicas)
                ec = error::not_replicated;
            if (ec) {
                if (!alive.expired())  // not replicated, or unknown: give the lease back
                    async_release(name, token, [](error_code, bool) {});
                out = acquire_result{};
            }
            std::move(h)(ec, out);
        });
    });
}

void redis_store::do_renew(const std::string& name, const std::string& token, std::chrono::milliseconds ttl,
                           asio::any_completion_handler<renew_signature> h)
{
    std::array<std::string, 1> keys{lock_key(name)};
    std::array<std::string, 2> args{token, std::to_string(ttl.count())};
    impl_->conn.async_eval(impl_->renew, keys, args, on_integer(std::move(h), [](long long v) { return renew_result{v >= 1, v == 2}; }));
}

void redis_store::do_release(const std::string& name, const std::string& token,
                             asio::any_completion_handler<bool_signature> h)
{
    release(name, token, false, std::move(h));
}

// The release script with the force flag: frees the name whoever holds it (and hands it on).
void redis_store::do_force_release(const std::string& name, asio::any_completion_handler<bool_signature> h)
{
    release(name, std::string(), true, std::move(h));
}

void redis_store::release(const std::string& name, const std::string& token, bool force,
                          asio::any_completion_handler<bool_signature> h)
{
    auto prefix = impl_->prefix(name);
    key_set k(prefix, name);
    std::array<std::string, 4> keys{std::move(k.lock), std::move(k.fence), key_set::queue(prefix, name),
                                    key_set::queue_ttls(prefix, name)};
    std::array<std::string, 4> args{token, std::move(k.channel), key_set::grants(prefix, name)};
    if (force)
        args[3].push_back('1');
    std::span<const std::string> argv(args.data(), force ? 4 : 3);
    impl_->conn.async_eval(impl_->release, keys, argv, on_integer(std::move(h), [](long long v) { return v == 1; }));
}

void redis_store::do_status(const std::string& name, asio::any_completion_handler<status_signature> h)
{
    auto prefix = impl_->prefix(name);
    key_set k(prefix, name);
    std::array<std::string, 3> keys{std::move(k.lock), std::move(k.fence), key_set::queue(prefix, name)};
    impl_->conn.async_eval(impl_->status, keys, {}, [h = std::move(h)](error_code ec, reply r) mutable {
        lock_status st;
        if (!ec)
            ec = detail::decode_status(r, st);
        std::move(h)(ec, std::move(st));
    });
}

store::watch_id redis_store::watch(const std::string& name, std::function<void(watch_event)> cb)
{
    return impl_->sub.listen(channel(name), [cb = std::move(cb)](const redis::event& ev) {
        switch (ev.kind) {
        case redis::event_kind::subscribed: cb(watch_event::ready); break;
        case redis::event_kind::message: cb(watch_event::released); break;
        case redis::event_kind::resubscribed: cb(watch_event::resync); break;
        case redis::event_kind::disconnected: break;  // resubscribed follows the reconnect
        }
    });
}

void redis_store::unwatch(watch_id id) { impl_->sub.unlisten(id); }

// WAIT after acquire cannot cover a hand-off made inside another client's release.
bool redis_store::direct_handoff() const noexcept { return impl_->wait_replicas <= 0; }

store::watch_id redis_store::watch_grant(const std::string& name, const std::string& token,
                                         std::function<void(watch_event, grant_notice)> cb)
{
    return impl_->sub.listen(grant_channel(name, token), [cb = std::move(cb)](const redis::event& ev) {
        switch (ev.kind) {
        case redis::event_kind::subscribed: cb(watch_event::ready, {}); break;
        case redis::event_kind::message: {
            // "<fence> <ttl_ms>"; anything else is not ours to trust: re-check at the store.
            grant_notice g;
            long long ttl = 0;
            std::istringstream in(ev.payload);
            if (in >> g.fencing_token >> ttl && ttl > 0) {
                g.ttl = std::chrono::milliseconds(ttl);
                cb(watch_event::granted, g);
            } else
                cb(watch_event::resync, {});
            break;
        }
        case redis::event_kind::resubscribed: cb(watch_event::resync, {}); break;
        case redis::event_kind::disconnected: break;
        }
    });
}

}  // namespace dlock
