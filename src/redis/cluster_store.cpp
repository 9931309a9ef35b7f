// SPDX-License-Identifier: BSL-1.0
#include <dlock/error.hpp>
#include <dlock/redis/cluster_store.hpp>
#include <dlock/redis/connection.hpp>
#include <dlock/redis/store.hpp>

#include "common/backoff.hpp"
#include "common/channel_table.hpp"
#include "common/lease_checks.hpp"
#include "common/post_completion.hpp"
#include "common/stored_handler.hpp"
#include "core/kind_text.hpp"
#include "redis/cluster_scripts.hpp"
#include "redis/cluster_slots.hpp"
#include "redis/describe.hpp"
#include "redis/eval_request.hpp"
#include "redis/keys.hpp"
#include "redis/latch_replies.hpp"
#include "redis/redis_scripts.hpp"
#include "redis/script_replies.hpp"
#include "redis/set_scripts.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <random>
#include <unordered_map>

namespace dlock {

namespace asio = boost::asio;
using boost::system::error_code;
using detail::post_completion;
using redis::reply;
using redis::reply_type;
using redis::detail::node_address;
using redis::detail::step_kind;

namespace {

enum script_id : std::size_t {
    s_acquire,
    s_renew,
    s_release,
    s_status,
    s_count_down,
    s_latch_state,
    s_proclaim,
    s_leader,
    s_set_acquire,
    s_set_renew,
    s_set_release,
    s_set_status,
    s_count
};

using reply_handler = asio::any_completion_handler<void(error_code, reply)>;

// One store operation while it is routed, redirected and retried.
struct op {
    script_id sid = s_acquire;
    unsigned slot = 0;
    std::vector<std::string> keys, args;
    int attempts = 0;
    std::optional<node_address> ask;                                  // the next attempt goes there, with ASKING
    std::optional<std::chrono::steady_clock::time_point> busy_since;  // the first TRYAGAIN
    asio::cancellation_slot cslot;
    detail::stored_handler<void(error_code, reply)> h;
};

using detail::as_int;

}  // namespace

struct cluster_store::impl : std::enable_shared_from_this<impl> {
    impl(asio::any_io_executor e, std::vector<redis::config> s, std::string n, cluster_options o)
        : ex(e), seeds(std::move(s)), ns(std::move(n)), opts(o),
          retry_timer(e), scripts{redis::script(cluster_scripts::sharded(dlock::scripts::acquire)),
                                  redis::script(dlock::scripts::renew),
                                  redis::script(cluster_scripts::sharded(dlock::scripts::release)),
                                  redis::script(dlock::scripts::status),
                                  redis::script(cluster_scripts::sharded(dlock::scripts::count_down)),
                                  redis::script(dlock::scripts::latch_state),
                                  redis::script(cluster_scripts::sharded(dlock::scripts::proclaim)),
                                  redis::script(dlock::scripts::leader),
                                  set_script(dlock::scripts::set_acquire),
                                  set_script(dlock::scripts::set_renew),
                                  set_script(dlock::scripts::set_release),
                                  set_script(dlock::scripts::set_status)}
    {
        if (seeds.empty())
            seeds.emplace_back();
    }

    static redis::script set_script(const char* body)
    {
        return redis::script(cluster_scripts::sharded(std::string(dlock::scripts::set_prelude) + body));
    }

    struct node {
        node_address addr;
        std::unique_ptr<redis::connection> cmd;
        std::unique_ptr<redis::connection> push;
    };

    // Where a watched channel lives; its watchers and subscription state are in `table`.
    struct channel_route {
        unsigned slot = 0;
        std::string node;  // "host:port" of the master it is subscribed on; empty: none yet
    };

    asio::any_io_executor ex;
    std::vector<redis::config> seeds;
    std::string ns;
    cluster_options opts;
    cluster_stats st;
    asio::steady_timer retry_timer;
    std::array<redis::script, s_count> scripts;
    bool closed = false;

    redis::detail::slot_map map;
    bool have_map = false;
    std::map<std::string, node> nodes;

    bool refreshing = false, refresh_again = false;
    // Spacing of the re-reads after failures; reset by a good read.
    detail::backoff refresh_backoff{std::chrono::milliseconds(25), std::chrono::milliseconds(2000)};
    std::minstd_rand rng{std::random_device{}()};
    std::vector<std::function<void(error_code)>> waiters_current, waiters_next;

    detail::channel_table table;
    std::unordered_map<std::string, channel_route> routes;  // the same channels as `table`
    // One watch: the name's release channel (part 0) and, with a token, the token's grant
    // channel (part 1), each in `table` as watcher id * 2 + part. Ready once both confirmed.
    struct watcher {
        watch_callback cb;
        std::array<std::string, 2> channels;
        std::array<bool, 2> confirmed{};
        bool ready = false;
    };
    std::map<watch_id, watcher> watchers;
    watch_id next_watch = 1;

    redis::detail::keys names(const std::string& name) const { return {ns, name}; }
    redis::detail::keys names(std::string&&) const = delete;  // keys refers to the name
    // A set's keys, then the mutex's lock hash (where the name's kind is marked) and queue,
    // as redis_store's, then the migration guard (every set script may delete a key).
    std::vector<std::string> set_keys(const std::string& name) const
    {
        auto k = names(name);
        return {k.holders(),       k.info(), k.fence(), k.set_queue(),
                k.set_queue_ttl(), k.lock(), k.queue(), k.migration_guard()};
    }

    // ---- nodes ----

    node& node_for(const node_address& a)
    {
        auto key = a.to_string();
        auto it = nodes.find(key);
        if (it == nodes.end())
            it = nodes.emplace(key, node{a, nullptr, nullptr}).first;
        return it->second;
    }

    redis::config config_for(const node_address& a) const
    {
        redis::config c = seeds.front();
        if (c.kind == redis::transport::unix_socket)
            c.kind = redis::transport::tcp;
        c.host = a.host;
        c.port = a.port;
        return c;
    }

    redis::connection& cmd_conn(const node_address& a)
    {
        auto& n = node_for(a);
        if (!n.cmd)
            n.cmd = std::make_unique<redis::connection>(ex, config_for(a));
        return *n.cmd;
    }

    redis::connection& push_conn(const node_address& a)
    {
        auto& n = node_for(a);
        if (!n.push) {
            n.push = std::make_unique<redis::connection>(ex, config_for(a));
            std::weak_ptr<impl> weak = weak_from_this();
            auto key = a.to_string();
            n.push->set_push_mode({
                [weak, key](reply&& r) {
                    if (auto s = weak.lock())
                        s->on_push(key, std::move(r));
                },
                [weak, key] {
                    if (auto s = weak.lock())
                        s->on_connected(key);
                },
                [weak, key](error_code) {
                    if (auto s = weak.lock())
                        s->on_disconnected(key);
                },
            });
        }
        return *n.push;
    }

    // ---- the slot map ----

    std::vector<node_address> candidates()
    {
        std::vector<node_address> out = map.masters();
        for (const auto& c : seeds) {
            node_address a{c.host, c.port};
            if (std::find(out.begin(), out.end(), a) == out.end())
                out.push_back(std::move(a));
        }
        return out;
    }

    // Starts a re-read unless one is running. `waiter` (if any) completes when the running
    // read ends, or with `fresh` when a read that started after this call ends.
    void request_refresh(std::function<void(error_code)> waiter = {}, bool fresh = true)
    {
        if (closed) {
            if (waiter)
                asio::post(ex, [w = std::move(waiter)] { w(error::closed); });
            return;
        }
        if (refreshing) {
            if (waiter && !fresh)
                return waiters_current.push_back(std::move(waiter));
            refresh_again = true;
            if (waiter)
                waiters_next.push_back(std::move(waiter));
            return;
        }
        if (waiter)
            waiters_current.push_back(std::move(waiter));
        refreshing = true;
        ++st.refreshes;
        try_candidate(std::make_shared<std::vector<node_address>>(candidates()), 0, error::connect_failed);
    }

    void try_candidate(std::shared_ptr<std::vector<node_address>> cands, std::size_t i, error_code last)
    {
        if (closed)
            return refresh_done(error::closed);
        if (i >= cands->size())
            return refresh_done(last);
        auto& conn = cmd_conn((*cands)[i]);
        std::weak_ptr<impl> weak = weak_from_this();
        auto ask = [weak, cands, i] {
            auto s = weak.lock();
            if (!s)
                return;
            redis::request req;
            req.push("CLUSTER", "SLOTS");
            s->cmd_conn((*cands)[i]).async_exec(req, [weak, cands, i](error_code ec, redis::response resp) {
                auto s = weak.lock();
                if (!s)
                    return;
                if (s->closed)
                    return s->refresh_done(error::closed);
                redis::detail::slot_map m;
                std::string why;
                if (!ec && (resp.size() != 1 || !redis::detail::parse_cluster_slots(resp[0], (*cands)[i].host, m, why)))
                    ec = error::protocol_error;
                if (!ec && m.empty())
                    ec = error::server_error;  // a node not yet part of a configured cluster
                if (ec)
                    return s->try_candidate(cands, i + 1, ec);
                s->map = std::move(m);
                s->have_map = true;
                s->refresh_done({});
            });
        };
        if (conn.is_connected())
            return ask();
        conn.async_connect([weak, cands, i, ask](error_code ec) {
            auto s = weak.lock();
            if (!s)
                return;
            if (ec)
                return s->try_candidate(cands, i + 1, ec);
            ask();
        });
    }

    void refresh_done(error_code ec)
    {
        refreshing = false;
        if (!ec) {
            refresh_backoff.reset();
            reassign_channels();
        } else if (ec != error::closed) {
            ++st.refresh_failures;
        }
        auto waiters = std::move(waiters_current);
        waiters_current.clear();
        if (refresh_again && !closed) {
            refresh_again = false;
            waiters_current = std::move(waiters_next);
            waiters_next.clear();
            request_refresh();
        } else if (ec && ec != error::closed && needs_map()) {
            schedule_refresh();
        }
        for (auto& w : waiters)
            w(ec);
    }

    // Something still waits for a (better) map: watched channels without a master.
    bool needs_map() const
    {
        return std::any_of(routes.begin(), routes.end(), [](const auto& c) { return c.second.node.empty(); });
    }

    // A re-read later, with backoff: after failures, or errors that a re-read at once
    // would only repeat.
    void schedule_refresh()
    {
        if (closed)
            return;
        retry_timer.expires_after(refresh_backoff.next(rng));
        std::weak_ptr<impl> weak = weak_from_this();
        retry_timer.async_wait([weak](error_code ec) {
            auto s = weak.lock();
            if (!ec && s && !s->closed)
                s->request_refresh();
        });
    }

    // ---- routing one operation ----

    void start(std::shared_ptr<op> o)
    {
        if (closed)
            return post_completion(ex, std::move(o->h), error_code(error::closed), reply{});
        if (!have_map) {
            // The first read of the topology; every operation waiting for it goes on after.
            std::weak_ptr<impl> weak = weak_from_this();
            return request_refresh(
                [weak, o, ex = ex](error_code ec) mutable {
                    auto s = weak.lock();
                    if (!s)
                        return post_completion(ex, std::move(o->h), error_code(error::closed), reply{});
                    if (ec && !s->have_map)
                        return post_completion(ex, std::move(o->h), ec, reply{});
                    s->send(std::move(o));
                },
                false);
        }
        send(std::move(o));
    }

    void send(std::shared_ptr<op> o)
    {
        if (closed)
            return post_completion(ex, std::move(o->h), error_code(error::closed), reply{});
        const node_address* target = o->ask ? &*o->ask : map.master_of(o->slot);
        if (!target) {
            // A hole in the map (a slot being reassigned): read it again, then try once more.
            if (++o->attempts > opts.max_redirects + 1)
                return post_completion(ex, std::move(o->h), error_code(error::server_error), reply{});
            std::weak_ptr<impl> weak = weak_from_this();
            return request_refresh([weak, o, ex = ex](error_code) mutable {
                auto s = weak.lock();
                if (!s || s->closed)
                    return post_completion(ex, std::move(o->h), error_code(error::closed), reply{});
                if (!s->map.master_of(o->slot))
                    return post_completion(ex, std::move(o->h), error_code(error::server_error), reply{});
                s->send(std::move(o));
            });
        }
        node_address from = *target;
        bool asking = o->ask.has_value();
        o->ask.reset();
        ++o->attempts;
        std::weak_ptr<impl> weak = weak_from_this();
        auto done = asio::bind_cancellation_slot(o->cslot, [weak, o, from](error_code ec, reply r) mutable {
            auto s = weak.lock();
            if (!s)
                return std::move(o->h)(ec ? ec : error_code(error::closed), std::move(r));
            s->on_attempt(std::move(o), from, ec, std::move(r));
        });
        auto& conn = cmd_conn(from);
        const auto& sc = scripts[o->sid];
        if (!asking)
            return conn.async_eval(sc, o->keys, o->args, std::move(done));
        eval_asking(from, sc, o->keys, o->args, std::move(done));
    }

    // ASKING + EVALSHA in one request (ASKING applies to the next command only), with the
    // same NOSCRIPT fallback as connection::async_eval.
    void eval_asking(const node_address& at, const redis::script& sc, const std::vector<std::string>& keys,
                     const std::vector<std::string>& args, reply_handler h)
    {
        auto call = std::make_shared<redis::detail::eval_request>(sc, keys, args, true);
        auto slot = asio::get_associated_cancellation_slot(h);
        std::weak_ptr<impl> weak = weak_from_this();
        cmd_conn(at).async_exec(
            call->first(false), asio::bind_cancellation_slot(slot, [weak, at, slot, call, h = std::move(h)](
                                                                       error_code ec, redis::response resp) mutable {
                auto [e, out] = call->take_reply(ec, resp);
                if (!redis::detail::is_noscript(e, out))
                    return std::move(h)(e, std::move(out));
                auto s = weak.lock();
                if (!s || s->closed)
                    return std::move(h)(error::closed, reply{});
                s->cmd_conn(at).async_exec(
                    call->reload(), asio::bind_cancellation_slot(
                                        slot, [call, h = std::move(h)](error_code ec, redis::response resp) mutable {
                                            auto [e, out] = call->take_reply(ec, resp);
                                            std::move(h)(e, std::move(out));
                                        }));
            }));
    }

    void on_attempt(std::shared_ptr<op> o, const node_address& from, error_code ec, reply r)
    {
        auto s = redis::detail::next_step(ec, r, from, o->attempts, opts.max_redirects + 1);
        if (s.refresh)
            request_refresh();
        switch (s.kind) {
        case step_kind::done: return std::move(o->h)(ec, std::move(r));
        case step_kind::fail: ++st.redirect_failures; return std::move(o->h)(s.ec, std::move(r));
        case step_kind::retry_moved:
            ++st.moved;
            if (map.assign(o->slot, s.target))
                reassign_channels();
            return send(std::move(o));
        case step_kind::retry_ask:
            ++st.ask;
            o->ask = std::move(s.target);
            return send(std::move(o));
        case step_kind::retry_later: {
            // Waited out for tryagain_limit rather than counted, with the ASK that may have led
            // here: a script with the migration guard waits until its slot's migration ends.
            ++st.tryagain;
            o->attempts = 0;
            auto now = std::chrono::steady_clock::now();
            if (!o->busy_since)
                o->busy_since = now;
            else if (now - *o->busy_since >= opts.tryagain_limit) {
                ++st.redirect_failures;
                return std::move(o->h)(error_code(error::server_busy), std::move(r));
            }
            auto timer = std::make_shared<asio::steady_timer>(ex, opts.tryagain_delay);
            std::weak_ptr<impl> weak = weak_from_this();
            auto slot = o->cslot;
            timer->async_wait(asio::bind_cancellation_slot(slot, [weak, o, timer](error_code ec) mutable {
                auto s = weak.lock();
                if (!s)
                    return std::move(o->h)(error::closed, reply{});
                if (ec)
                    return std::move(o->h)(ec, reply{});  // cancelled by the caller
                s->send(std::move(o));
            }));
            return;
        }
        }
    }

    // ---- sharded pub/sub ----

    // Watchers may watch or unwatch from inside a callback: each is looked up again, and
    // nothing of it is touched after its callback ran.
    void tell_message(const std::string& channel, const std::string& payload)
    {
        for (auto tid : table.watchers(channel)) {
            auto w = watchers.find(tid / 2);
            if (w == watchers.end())
                continue;
            auto cb = w->second.cb;
            if (tid % 2 == 0) {
                cb(watch_event::released, {});
                continue;
            }
            grant_notice g;
            if (detail::parse_grant(payload, g))
                cb(watch_event::granted, g);
            else if (w->second.ready)
                cb(watch_event::resync, {});  // not ours to trust: re-check at the store
        }
    }

    // A subscription of watch `tid / 2` confirmed: before `ready` it counts towards it, after
    // it (`again`) messages may have been missed.
    void tell_confirmed(watch_id tid, bool again)
    {
        auto w = watchers.find(tid / 2);
        if (w == watchers.end())
            return;
        auto& st = w->second;
        auto cb = st.cb;
        if (st.ready) {
            if (again)
                cb(watch_event::resync, {});
            return;
        }
        st.confirmed[tid % 2] = true;
        if (!st.confirmed[0] || (!st.channels[1].empty() && !st.confirmed[1]))
            return;
        st.ready = true;
        cb(watch_event::ready, {});
    }

    // Watcher `tid` joins `channel`: the first one subscribes where its slot lives; a later
    // one of a confirmed channel hears its confirmation (posted).
    void add_channel(const std::string& channel, watch_id tid)
    {
        if (table.add(channel, tid)) {
            auto& route = routes[channel];
            route.slot = key_slot(channel);
            if (closed)
                return table.on_lost(channel);  // nothing sent
            if (const auto* owner = have_map ? map.master_of(route.slot) : nullptr) {
                subscribe(channel, route, *owner);
            } else {
                table.on_lost(channel);  // nothing sent yet:
                request_refresh();       // reassign_channels() subscribes it once the map is in
            }
        } else if (table.is_confirmed(channel)) {
            std::weak_ptr<impl> weak = weak_from_this();
            asio::post(ex, [weak, tid] {
                if (auto self = weak.lock())
                    self->tell_confirmed(tid, false);
            });
        }
    }

    void remove_channel(const std::string& channel, watch_id tid)
    {
        if (!table.remove(channel, tid))
            return;
        auto it = routes.find(channel);
        if (it == routes.end())
            return;
        auto node = std::move(it->second.node);
        routes.erase(it);
        auto n = nodes.find(node);
        if (!node.empty() && n != nodes.end() && n->second.push && !closed) {
            redis::request req;
            req.push("SUNSUBSCRIBE", channel);
            n->second.push->send(req);
        }
    }

    void subscribe(const std::string& channel, channel_route& r, const node_address& owner)
    {
        r.node = owner.to_string();
        table.on_resubscribe(channel);
        redis::request req;
        req.push("SSUBSCRIBE", channel);
        push_conn(owner).send(std::move(req));
    }

    // Every channel not subscribed where the map says its slot lives moves there.
    void reassign_channels()
    {
        for (auto& [name, r] : routes) {
            const node_address* owner = map.master_of(r.slot);
            if (!owner || r.node == owner->to_string())
                continue;
            if (!r.node.empty())
                ++st.resubscribes;
            subscribe(name, r, *owner);
        }
    }

    void on_push(const std::string& node, reply&& r)
    {
        if (r.is_error()) {
            // An SSUBSCRIBE refused: MOVED (the slot left this master) or a down cluster.
            auto at = nodes.find(node);
            auto rd = redis::detail::parse_redirect(r.str, at != nodes.end() ? at->second.addr.host : "");
            for (auto& [name, route] : routes)
                if (route.node == node && !table.is_confirmed(name) &&
                    (rd.kind != redis::detail::redirect_kind::moved || route.slot == rd.slot)) {
                    route.node.clear();
                    table.on_lost(name);
                }
            if (rd.kind == redis::detail::redirect_kind::moved) {
                ++st.moved;
                map.assign(rd.slot, rd.target);
                reassign_channels();
                request_refresh();
            } else {
                schedule_refresh();
            }
            return;
        }
        if (r.type != reply_type::array || r.elements.size() < 3)
            return;
        const std::string& kind = r.elements[0].str;
        const std::string& channel = r.elements[1].str;
        auto it = routes.find(channel);
        if (it == routes.end())
            return;
        auto& route = it->second;
        if (kind == "smessage") {
            tell_message(channel, r.elements[2].str);
        } else if (kind == "ssubscribe") {
            if (route.node != node)
                return;  // a late answer from a master the channel has left
            auto c = table.on_confirm(channel);
            for (auto tid : c.watchers)
                tell_confirmed(tid, c.kind == detail::channel_table::confirm_kind::resync);
        } else if (kind == "sunsubscribe") {
            // Ours come before the re-subscribe that follows them (pending > 0); one with
            // nothing pending is the server dropping the channel as its slot moved away.
            if (route.node != node || table.pending(channel) > 0)
                return;
            ++st.server_unsubscribes;
            table.on_lost(channel);
            route.node.clear();
            request_refresh();
        }
    }

    void on_connected(const std::string& node)
    {
        auto n = nodes.find(node);
        if (n == nodes.end() || !n->second.push)
            return;
        redis::request req;
        for (auto& [name, route] : routes) {
            if (route.node != node)
                continue;
            table.on_resubscribe(name);
            req.push("SSUBSCRIBE", name);  // one per command: channels of different slots
        }
        if (req.size() > 0)
            n->second.push->send(req, true);
    }

    void on_disconnected(const std::string& node)
    {
        for (auto& [name, route] : routes) {
            if (route.node == node)
                table.on_lost(name);
        }
        request_refresh();  // the master may be gone for good (failover)
    }

    void close()
    {
        closed = true;
        retry_timer.cancel();
        // Operations waiting for a topology read fail now (posted), not with the read.
        auto waiters = std::move(waiters_current);
        waiters_current.clear();
        for (auto& w : waiters_next)
            waiters.push_back(std::move(w));
        waiters_next.clear();
        for (auto& w : waiters)
            w(error::closed);
        for (auto& [key, n] : nodes) {
            if (n.cmd)
                n.cmd->close();
            if (n.push)
                n.push->close();
        }
    }
};

cluster_store::cluster_store(asio::any_io_executor ex, std::vector<redis::config> seeds, std::string ns,
                             cluster_options opts)
    : impl_(std::make_shared<impl>(ex, std::move(seeds), std::move(ns), opts))
{
}

cluster_store::cluster_store(asio::any_io_executor ex, redis::config seed, std::string ns, cluster_options opts)
    : cluster_store(ex, std::vector<redis::config>{std::move(seed)}, std::move(ns), opts)
{
}

cluster_store::~cluster_store()
{
    impl_->close();
}

asio::any_io_executor cluster_store::get_executor() const
{
    return impl_->ex;
}
void cluster_store::close()
{
    impl_->close();
}
const cluster_stats& cluster_store::stats() const noexcept
{
    return impl_->st;
}

std::string cluster_store::lock_key(const std::string& name) const
{
    return impl_->names(name).lock();
}
std::string cluster_store::fence_key(const std::string& name) const
{
    return impl_->names(name).fence();
}
std::string cluster_store::channel(const std::string& name) const
{
    return impl_->names(name).released();
}

std::string cluster_store::master_of(const std::string& name) const
{
    const auto* a = impl_->map.master_of(key_slot(lock_key(name)));
    return a ? a->to_string() : std::string();
}

std::vector<std::string> cluster_store::masters() const
{
    std::vector<std::string> out;
    for (const auto& a : impl_->map.masters())
        out.push_back(a.to_string());
    return out;
}

// Connecting is reading the slot map from some seed.
void cluster_store::do_connect(asio::any_completion_handler<connect_signature> h)
{
    refresh_impl(std::move(h));
}

void cluster_store::refresh_impl(asio::any_completion_handler<void(error_code)> h)
{
    auto shared = std::make_shared<asio::any_completion_handler<void(error_code)>>(std::move(h));
    // Always posted: the waiter may run inside request_refresh (a closed store).
    impl_->request_refresh([ex = impl_->ex, shared](error_code ec) { post_completion(ex, std::move(*shared), ec); });
}

namespace {

// An op for `name`'s slot whose reply `map` turns into the caller's result.
template <class Signature, class Map>
std::shared_ptr<op> make_op(script_id sid, unsigned slot, std::vector<std::string> keys, std::vector<std::string> args,
                            asio::any_completion_handler<Signature> h, Map map)
{
    auto o = std::make_shared<op>();
    o->sid = sid;
    o->slot = slot;
    o->keys = std::move(keys);
    o->args = std::move(args);
    o->cslot = asio::get_associated_cancellation_slot(h);
    o->h = reply_handler([h = std::move(h), map](error_code ec, reply r) mutable { map(std::move(h), ec, r); });
    return o;
}

// The map of a script's reply: `decode` for a good one, the shared error table for a
// server error (its text to `keep`).
template <class Result, class Signature, class Decode>
auto script_result(Decode decode, std::function<void(std::string)> keep)
{
    return [decode, keep = std::move(keep)](asio::any_completion_handler<Signature> h, error_code ec, const reply& r) {
        Result out{};
        ec = detail::finish_script(ec, r, out, decode, keep);
        std::move(h)(ec, std::move(out));
    };
}

// A read of the name's lock hash and fence (the status and leader scripts): `decode`'s
// lock_status, with the lock's key for operators.
template <class Decode>
auto name_read_op(script_id sid, const redis::detail::keys& k, Decode decode,
                  asio::any_completion_handler<void(error_code, lock_status)> h, std::function<void(std::string)> keep,
                  bool with_queue = false)
{
    std::vector<std::string> keys{k.lock(), k.fence()};
    if (with_queue)
        keys.push_back(k.queue());
    auto slot = key_slot(keys[0]);
    auto with_key = [key = keys[0], decode](const reply& r, lock_status& st) {
        auto ec = decode(r, st);
        st.key = key;
        return ec;
    };
    return make_op(sid, slot, std::move(keys), {}, std::move(h),
                   script_result<lock_status, void(error_code, lock_status)>(with_key, std::move(keep)));
}

}  // namespace

store_traits cluster_store::traits() const noexcept
{
    store_traits t;
    t.max_ttl = detail::redis_max_ttl;
    t.direct_handoff = true;
    t.kinds |= static_cast<unsigned>(lease_kind::read) | static_cast<unsigned>(lease_kind::write) |
               static_cast<unsigned>(lease_kind::permit);
    return t;
}

std::string cluster_store::describe() const
{
    std::string out = "redis-cluster ";
    for (std::size_t i = 0; i < impl_->seeds.size(); ++i)
        out += (i ? "," : "") + detail::config_address(impl_->seeds[i]);
    return out + " ns=" + impl_->ns;
}

std::function<void(std::string)> cluster_store::text_keeper()
{
    return [this, alive = lifetime()](std::string text) {
        if (!alive.expired())
            set_error_text(std::move(text));
    };
}

// The mutex queues (with "1") for the direct hand-off: the release, or an acquire after the
// holder's lease ran out, grants the first waiter still subscribed to its grant channel.
void cluster_store::do_try_acquire(const lease_request& req, asio::any_completion_handler<acquire_signature> h)
{
    if (!detail::valid_redis_ttl(req.ttl))
        return post_completion(impl_->ex, std::move(h), error_code(error::invalid_lease), acquire_result{});
    auto decode = [ttl = req.ttl](const reply& r, acquire_result& out, auto& keep) {
        return detail::decode_acquire(r, ttl, out, keep);
    };
    auto map = script_result<acquire_result, acquire_signature>(decode, text_keeper());
    auto k = impl_->names(req.name);
    if (req.kind == lease_kind::mutex) {
        std::vector<std::string> keys{k.lock(), k.fence(), k.queue(), k.queue_ttl(), k.migration_guard()};
        auto slot = key_slot(keys[0]);
        return impl_->start(
            make_op(s_acquire, slot, std::move(keys),
                    {req.token, std::to_string(req.ttl.count()), req.queue ? "1" : "0", k.grant_prefix()}, std::move(h),
                    std::move(map)));
    }
    if (req.kind == lease_kind::permit && req.capacity == 0)
        return post_completion(impl_->ex, std::move(h), error_code(error::invalid_option), acquire_result{});
    auto keys = impl_->set_keys(req.name);
    auto slot = key_slot(keys[0]);
    impl_->start(make_op(s_set_acquire, slot, std::move(keys),
                         {req.token, std::to_string(req.ttl.count()), std::string(1, detail::set_kind_letter(req.kind)),
                          std::to_string(req.kind == lease_kind::permit ? req.capacity : 0), k.grant_prefix(),
                          req.queue ? "1" : "0"},
                         std::move(h), std::move(map)));
}

void cluster_store::do_renew(const lease_key& k, std::chrono::milliseconds ttl,
                             asio::any_completion_handler<renew_signature> h)
{
    if (!detail::valid_redis_ttl(ttl))
        return post_completion(impl_->ex, std::move(h), error_code(error::invalid_lease), renew_result{});
    auto map = script_result<renew_result, renew_signature>(detail::decode_renew, text_keeper());
    if (k.kind != lease_kind::mutex) {
        auto keys = impl_->set_keys(k.name);
        auto slot = key_slot(keys[0]);
        return impl_->start(
            make_op(s_set_renew, slot, std::move(keys), {k.token, std::to_string(ttl.count())}, std::move(h), map));
    }
    auto key = lock_key(k.name);
    auto slot = key_slot(key);
    impl_->start(make_op(s_renew, slot, {std::move(key)}, {k.token, std::to_string(ttl.count())}, std::move(h), map));
}

void cluster_store::do_release(const lease_key& k, asio::any_completion_handler<bool_signature> h)
{
    if (k.kind != lease_kind::mutex)
        return release_set(k.name, k.token, '0', std::move(h));
    release_mutex(k.name, k.token, false, std::move(h));
}

// Whoever holds it, and hands it on; a name no mutex holds may be a read-write lock's or a
// semaphore's. One side of a read-write lock goes to the set's script alone.
void cluster_store::do_force_release(const std::string& name, lease_kind side,
                                     asio::any_completion_handler<bool_signature> h)
{
    if (detail::one_side(side))
        return release_set(name, std::string(), detail::force_letter(side), std::move(h));
    auto slot = asio::get_associated_cancellation_slot(h);
    release_mutex(name, std::string(), true,
                  asio::bind_cancellation_slot(
                      slot, [this, alive = lifetime(), name, h = std::move(h)](error_code ec, bool held) mutable {
                          if (ec || held || alive.expired())
                              return std::move(h)(ec, held);
                          release_set(name, std::string(), '1', std::move(h));
                      }));
}

void cluster_store::release_mutex(const std::string& name, const std::string& token, bool force,
                                  asio::any_completion_handler<bool_signature> h)
{
    auto n = impl_->names(name);
    std::vector<std::string> keys{n.lock(), n.fence(), n.queue(), n.queue_ttl(), n.migration_guard()};
    std::vector<std::string> args{token, n.released(), n.grant_prefix()};
    if (force)
        args.emplace_back("1");
    auto slot = key_slot(keys[0]);
    impl_->start(make_op(s_release, slot, std::move(keys), std::move(args), std::move(h),
                         script_result<bool, bool_signature>(detail::decode_release, text_keeper())));
}

void cluster_store::release_set(const std::string& name, const std::string& token, char force,
                                asio::any_completion_handler<bool_signature> h)
{
    auto n = impl_->names(name);
    auto keys = impl_->set_keys(name);
    auto slot = key_slot(keys[0]);
    impl_->start(make_op(s_set_release, slot, std::move(keys),
                         {token, n.released(), n.grant_prefix(), std::string(1, force)}, std::move(h),
                         script_result<bool, bool_signature>(detail::decode_release, text_keeper())));
}

// A name no mutex holds may be a read-write lock's or a semaphore's: then their view.
void cluster_store::do_status(const std::string& name, asio::any_completion_handler<status_signature> h)
{
    auto slot = asio::get_associated_cancellation_slot(h);
    asio::any_completion_handler<status_signature> then = asio::bind_cancellation_slot(
        slot, [this, alive = lifetime(), name, h = std::move(h)](error_code ec, lock_status st) mutable {
            if (ec || st.held || st.queued > 0 || alive.expired())
                return std::move(h)(ec, std::move(st));
            auto keys = impl_->set_keys(name);
            auto decode = [key = keys[0]](const reply& r, lock_status& out) {
                auto ec = detail::decode_set_status(r, out);
                out.key = key;
                return ec;
            };
            auto pick = [st, h = std::move(h)](error_code ec, lock_status set) mutable {
                // Nothing there either: the mutex's (empty) view, with its key.
                if (!ec && !set.held && set.queued == 0 && set.capacity == 0)
                    return std::move(h)(ec, std::move(st));
                std::move(h)(ec, std::move(set));
            };
            auto slot_of = key_slot(keys[0]);
            impl_->start(make_op(s_set_status, slot_of, std::move(keys), {},
                                 asio::any_completion_handler<status_signature>(std::move(pick)),
                                 script_result<lock_status, status_signature>(decode, text_keeper())));
        });
    impl_->start(
        name_read_op(s_status, impl_->names(name), detail::decode_status, std::move(then), text_keeper(), true));
}

// ---- count-down latches and elections: redis_store's scripts, routed to the name's slot ----

latch_capability* cluster_store::latches() noexcept
{
    return this;
}

election_capability* cluster_store::elections() noexcept
{
    return this;
}

void cluster_store::do_count_down(const std::string& name, const std::string& member, std::uint64_t count,
                                  std::chrono::milliseconds ttl, asio::any_completion_handler<count_down_signature> h)
{
    auto ec = detail::count_down_refusal(count, member);
    if (!ec && !detail::valid_redis_ttl(ttl))
        ec = error::invalid_lease;
    if (ec)
        return post_completion(impl_->ex, std::move(h), ec, std::uint64_t{0});
    auto k = impl_->names(name);
    std::vector<std::string> keys{k.latch(), k.latch_members()};
    auto slot = key_slot(keys[0]);
    impl_->start(make_op(s_count_down, slot, std::move(keys),
                         {member, std::to_string(count), std::to_string(ttl.count()), k.released()}, std::move(h),
                         script_result<std::uint64_t, count_down_signature>(detail::decode_count_down, text_keeper())));
}

void cluster_store::do_latch_state(const std::string& name, asio::any_completion_handler<latch_state_signature> h)
{
    auto k = impl_->names(name);
    std::vector<std::string> keys{k.latch(), k.latch_members()};
    auto slot = key_slot(keys[0]);
    impl_->start(make_op(s_latch_state, slot, std::move(keys), {}, std::move(h),
                         script_result<latch_state, latch_state_signature>(detail::decode_latch_state, text_keeper())));
}

void cluster_store::do_proclaim(const lease_key& key, const std::string& value,
                                asio::any_completion_handler<proclaim_signature> h)
{
    auto k = impl_->names(key.name);
    std::vector<std::string> keys{k.lock()};
    auto slot = key_slot(keys[0]);
    impl_->start(make_op(s_proclaim, slot, std::move(keys), {key.token, value, k.released()}, std::move(h),
                         script_result<bool, proclaim_signature>(detail::decode_release, text_keeper())));
}

void cluster_store::do_leader(const std::string& name, asio::any_completion_handler<leader_signature> h)
{
    impl_->start(name_read_op(s_leader, impl_->names(name), detail::decode_leader, std::move(h), text_keeper()));
}

// Callbacks run only from tell_message(), tell_confirmed() and the posted confirmation, and
// each looks the watch up first: none reaches a watch after unwatch() erased it.
store::watch_id cluster_store::watch(const std::string& name, const std::string& token, watch_callback cb)
{
    auto& s = *impl_;
    auto id = s.next_watch++;
    auto& w = s.watchers[id];
    w.cb = std::move(cb);
    w.channels[0] = channel(name);
    if (!token.empty())
        w.channels[1] = s.names(name).grant(token);
    auto channels = w.channels;  // add_channel may change `watchers`
    for (std::size_t part = 0; part < 2; ++part)
        if (!channels[part].empty())
            s.add_channel(channels[part], id * 2 + part);
    return id;
}

void cluster_store::unwatch(watch_id id)
{
    auto& s = *impl_;
    auto w = s.watchers.find(id);
    if (w == s.watchers.end())
        return;
    auto channels = std::move(w->second.channels);
    s.watchers.erase(w);
    for (std::size_t part = 0; part < 2; ++part)
        if (!channels[part].empty())
            s.remove_channel(channels[part], id * 2 + part);
}

}  // namespace dlock
