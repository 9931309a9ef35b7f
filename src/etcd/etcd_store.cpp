// SPDX-License-Identifier: BSL-1.0
#include <dlock/error.hpp>
#include <dlock/etcd/store.hpp>

#include "common/backoff.hpp"
#include "common/post_completion.hpp"
#include "common/session_life.hpp"
#include "etcd/codec.hpp"
#include "etcd/http_pool.hpp"
#include "etcd/watch_stream.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <map>
#include <random>

namespace dlock {

namespace asio = boost::asio;
using boost::system::error_code;
using std::chrono::milliseconds;
using clock_type = std::chrono::steady_clock;
using namespace etcd::detail;

namespace {

milliseconds ms_until(clock_type::time_point t, clock_type::time_point from)
{
    return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(t - from));
}

}  // namespace

struct etcd_store::impl : std::enable_shared_from_this<impl> {
    impl(asio::any_io_executor e, etcd::config c)
        : ex(e), cfg(std::move(c)), pool(e, cfg), keepalive_timer(e), deadline_timer(e)
    {
    }

    asio::any_io_executor ex;
    etcd::config cfg;
    http_pool pool;
    etcd_store* owner = nullptr;  // null once the store is gone
    bool closed = false;
    bool probed = false;  // the gateway answered as etcd once
    std::minstd_rand rng{std::random_device{}()};

    // ---- the session: one etcd lease ----
    std::int64_t lease = 0;            // 0: none (life.id() as etcd numbers it)
    dlock::detail::session_life life;  // its events, keep-alive schedule and deadline
    bool granting = false;
    std::vector<std::function<void(error_code)>> session_waiters;
    asio::steady_timer keepalive_timer, deadline_timer;
    std::map<watch_id, std::function<void(session_event, const session_info&)>> session_watchers;

    // ---- watches ----
    struct watcher {
        std::string name, token;
        watch_callback cb;
        bool alive = true;
        bool ready = false;
    };
    std::map<watch_id, std::shared_ptr<watcher>> watchers;
    watch_id next_id = 1;

    // A queued token waiting for its predecessor's key to go.
    struct queued {
        std::string name, token, key;
        std::int64_t mine = 0;                // our key's create_revision
        milliseconds ttl{0};                  // the lease the attempt asked for
        clock_type::time_point first_send{};  // the first queued attempt's send time
        std::shared_ptr<watch_stream> stream;
        std::string watching;          // the predecessor the stream watches
        std::int64_t checked_rev = 0;  // the revision of the last check
        std::shared_ptr<asio::steady_timer> retry;
        dlock::detail::backoff pause{milliseconds(20), milliseconds(1000)};
        bool done = false;
        bool checking = false;
    };
    std::map<std::pair<std::string, std::string>, std::shared_ptr<queued>> queue;

    // Untokened watchers of a name share one stream of deletions under it.
    struct name_stream {
        std::shared_ptr<watch_stream> stream;
        std::shared_ptr<asio::steady_timer> retry;
        std::int64_t next_rev = 0;
        bool created = false;
        dlock::detail::backoff pause{milliseconds(20), milliseconds(1000)};
    };
    std::map<std::string, name_stream> names;
    std::map<std::string, bool> contended;  // another token of ours asked while one of ours held
    // Per (name, token): acquires in flight, and releases that wait for them. A release must
    // not overtake its token's acquire (they may go over different connections, or the
    // acquire may still wait for a lease): it would find nothing, and the acquire's key
    // would then stay, held by nobody, for as long as our lease lives.
    std::map<std::pair<std::string, std::string>, int> acquiring;
    std::map<std::pair<std::string, std::string>, std::vector<std::function<void()>>> after_acquire;

    // ---------------------------------------------------------------------------------
    std::string range_of(const std::string& name) const { return cfg.prefix + name + "/"; }
    // Which of our keys under a name each of its tokens uses: slot 0 is etcd's own
    // `<name>/<lease hex>`; a second token of this store on the name at once takes
    // `<name>/<lease hex>-1`, and so on. A slot is freed once its key is known gone. So a name
    // has as many key names of ours as tokens at once (etcd keeps every deleted key name in
    // its index until compaction, and each one slows the range reads of the name).
    std::map<std::string, std::vector<std::string>> slots;  // name -> token per slot ("" = free)

    std::string slot_key(const std::string& name, std::size_t slot) const
    {
        auto k = lock_key(range_of(name), lease);
        return slot == 0 ? k : k + "-" + std::to_string(slot);
    }
    // The key of `token` under `name`; empty without a lease or a slot.
    std::string key_for(const std::string& name, const std::string& token) const
    {
        auto s = slots.find(name);
        if (!lease || s == slots.end())
            return {};
        auto it = std::find(s->second.begin(), s->second.end(), token);
        return it == s->second.end() ? std::string() : slot_key(name, static_cast<std::size_t>(it - s->second.begin()));
    }
    // The same, giving the token the first free slot if it has none.
    std::string assign_key(const std::string& name, const std::string& token)
    {
        if (!lease)
            return {};
        auto& v = slots[name];
        auto it = std::find(v.begin(), v.end(), token);
        if (it == v.end()) {
            it = std::find(v.begin(), v.end(), std::string());
            if (it == v.end())
                it = v.insert(v.end(), token);
            else
                *it = token;
        }
        return slot_key(name, static_cast<std::size_t>(it - v.begin()));
    }
    void free_slot(const std::string& name, const std::string& token)
    {
        auto s = slots.find(name);
        if (s == slots.end())
            return;
        auto& v = s->second;
        std::replace(v.begin(), v.end(), token, std::string());
        while (!v.empty() && v.back().empty())
            v.pop_back();
        if (v.empty())
            slots.erase(s);
    }
    session_info info() const { return life.info(); }
    void set_text(std::string t)
    {
        if (owner)
            owner->set_error_text(std::move(t));
    }
    // A reply's status and body: the error if it failed.
    error_code reply_failed(error_code ec, const http_reply& r, reply_error& err)
    {
        if (closed)
            return error::closed;
        if (ec) {
            set_text("etcd " + pool.current() + ": " + ec.message());
            return ec;
        }
        if (r.status != 200) {
            err = classify(r.status, r.body);
            set_text(err.text);
            return err.code;
        }
        return {};
    }
    void fail_text(const reply_error& err) { set_text(err.text); }
    // A reply through `parse(body, err)`: the transport's, the server's or the parser's error.
    template <class Parse>
    error_code decode(error_code ec, const http_reply& r, Parse parse, reply_error& err)
    {
        ec = reply_failed(ec, r, err);
        if (!ec && !parse(r.body, err)) {
            fail_text(err);
            ec = err.code;
        }
        return ec;
    }

    template <class F>
    void request(std::string_view path, std::string body, F f, milliseconds timeout = milliseconds(0),
                 bool urgent = false, bool idempotent = true)
    {
        pool.post(
            path, std::move(body),
            [self = shared_from_this(), f = std::move(f)](error_code ec, http_reply r) mutable { f(ec, std::move(r)); },
            timeout, urgent, idempotent);
    }

    // ---- session -------------------------------------------------------------------
    void emit_session(std::optional<session_event> ev)
    {
        if (!ev)
            return;
        auto i = info();
        for (auto& [id, cb] : std::map(session_watchers))  // a callback may unwatch
            if (session_watchers.count(id))
                cb(*ev, i);
    }

    // Calls `cont` once a lease is live (granted now if none), or with the error.
    void ensure_session(std::int64_t want_s, std::function<void(error_code)> cont)
    {
        if (closed)
            return cont(error::closed);
        if (lease)
            return cont({});
        session_waiters.push_back(std::move(cont));
        if (granting)
            return;
        granting = true;
        if (!probed)
            return probe(want_s);
        grant(want_s);
    }
    void fail_session_waiters(error_code ec)
    {
        granting = false;
        auto w = std::move(session_waiters);
        session_waiters.clear();
        for (auto& c : w)
            c(ec);
    }
    // One look at the server before the first grant: a server that is not an etcd gateway
    // is a permanent error, not a connection to retry forever.
    void probe(std::int64_t want_s, bool again = false)
    {
        request("/v3/maintenance/status", "{}", [this, want_s, again](error_code ec, http_reply r) {
            if (closed)
                return fail_session_waiters(error::closed);
            if (ec && ec != error::connection_lost)
                return fail_session_waiters(ec);
            // A member may drop one connection as it goes down; a server that is not etcd (Redis
            // closes on "POST") does it every time: one more try tells them apart.
            if (ec && !again)
                return probe(want_s, true);
            bool etcd = !ec && r.status == 200 && r.body.find("\"version\"") != std::string::npos;
            if (!etcd) {
                if (!ec && r.status != 200) {
                    auto err = classify(r.status, r.body);
                    if (err.code != error::protocol_error) {  // etcd, refusing: say why
                        set_text(err.text);
                        return fail_session_waiters(err.code);
                    }
                }
                set_text("etcd " + pool.current() + ": the server did not answer as an etcd v3 gateway (" +
                         (ec ? std::string("it closed the connection") : "HTTP " + std::to_string(r.status)) + ")");
                return fail_session_waiters(error::protocol_error);
            }
            probed = true;
            grant(want_s);
        });
    }
    void grant(std::int64_t want_s)
    {
        auto ttl = cfg.lease_ttl.count() > 0 ? static_cast<std::int64_t>(cfg.lease_ttl.count()) : want_s;
        auto sent = clock_type::now();
        request(grant_path, grant_request(ttl), [this, ttl, sent](error_code ec, http_reply r) {
            reply_error err;
            if (auto e = reply_failed(ec, r, err))
                return fail_session_waiters(e);
            lease_reply l;
            if (!parse_lease(r.body, l, err)) {
                fail_text(err);
                return fail_session_waiters(err.code);
            }
            if (l.id == 0 || l.ttl <= 0) {
                set_text("etcd: a lease grant without an ID or TTL");
                return fail_session_waiters(error::protocol_error);
            }
            if (l.ttl > ttl) {
                // The cluster raised it to its minimum: our deadlines would be wrong.
                request(revoke_path, lease_id_request(l.id), [](error_code, http_reply) {});
                set_text("etcd: a lease of " + std::to_string(ttl) + " s is below the cluster's minimum of " +
                         std::to_string(l.ttl) + " s (set by its election timeout)");
                return fail_session_waiters(error::invalid_lease);
            }
            lease = l.id;
            granting = false;
            // A keep-alive each third of the TTL; after a failed one, again soon.
            auto third = milliseconds(std::max<std::int64_t>(l.ttl * 1000 / 3, 100));
            auto up = life.opened(static_cast<std::uint64_t>(l.id), sent, std::chrono::seconds(l.ttl),
                                  {third, std::min(third / 2, milliseconds(250))});
            arm_keepalive();
            arm_deadline();
            emit_session(up);
            auto w = std::move(session_waiters);
            session_waiters.clear();
            for (auto& c : w)
                c({});
        });
    }
    void arm_keepalive()
    {
        keepalive_timer.expires_at(life.next_keepalive());
        keepalive_timer.async_wait([self = shared_from_this(), l = lease](error_code ec) {
            if (!ec && !self->closed && self->lease == l)
                self->keepalive();
        });
    }
    void arm_deadline()
    {
        deadline_timer.expires_at(life.deadline());
        deadline_timer.async_wait([self = shared_from_this(), l = lease](error_code ec) {
            if (ec || self->closed || self->lease != l)
                return;
            if (self->life.expired(clock_type::now()))
                self->session_gone("etcd: no keep-alive of lease " + std::to_string(l) +
                                   " was confirmed before its local deadline");
        });
    }
    void keepalive()
    {
        auto sent = clock_type::now();
        auto l = lease;
        auto third = milliseconds(std::max<std::int64_t>(life.ttl().count() / 3, 100));
        request(
            keepalive_path, lease_id_request(l),
            [this, sent, l](error_code ec, http_reply r) {
                if (closed || lease != l)
                    return;
                reply_error err;
                lease_reply out;
                ec = decode(
                    ec, r, [&](std::string_view b, reply_error& e) { return parse_lease(b, out, e); }, err);
                if (!ec && out.ttl <= 0)
                    return session_gone("etcd: lease " + std::to_string(l) + " expired at the server");
                if (ec == error::session_lost)
                    return session_gone(err.text);
                if (ec) {
                    auto ev = life.unconfirmed(clock_type::now());
                    arm_keepalive();
                    return emit_session(ev);
                }
                auto ev = life.confirmed(sent, std::chrono::seconds(out.ttl));
                arm_deadline();
                arm_keepalive();
                emit_session(ev);
            },
            std::min(cfg.request_timeout, third), true);  // ahead of queued requests
    }
    // The lease is gone (or can no longer be trusted): every lock of it is lost at once.
    void session_gone(std::string why)
    {
        if (!lease)
            return;
        set_text(std::move(why));
        auto old = life.end();
        auto old_id = lease;
        lease = 0;
        slots.clear();  // every key of the lease is gone with it
        keepalive_timer.cancel();
        deadline_timer.cancel();
        // Best effort: a lease we stopped trusting must not keep its keys until it expires.
        request(revoke_path, lease_id_request(old_id), [](error_code, http_reply) {});
        for (auto& [id, cb] : std::map(session_watchers))
            if (session_watchers.count(id))
                cb(session_event::lost, old);
        // Queued keys went with the lease: their waiters must queue again.
        for (auto& [k, q] : std::map(queue))
            drop_queued(q, watch_event::resync);
    }

    // ---- watchers ------------------------------------------------------------------
    void notify(const std::shared_ptr<watcher>& w, watch_event ev, grant_notice g = {})
    {
        asio::post(ex, [w, ev, g = std::move(g)] {
            if (w->alive)
                w->cb(ev, g);
        });
    }
    std::shared_ptr<watcher> tokened(const std::string& name, const std::string& token)
    {
        for (auto& [id, w] : watchers)
            if (w->name == name && w->token == token)
                return w;
        return nullptr;
    }

    // Waits for the key created just before ours to go (etcd's waitDeletes).
    void start_queued(const std::string& name, const std::string& token, const key_value& mine,
                      clock_type::time_point sent, milliseconds ttl)
    {
        auto& slot = queue[{name, token}];
        if (slot && slot->mine == mine.create_revision)
            return;  // already waiting
        if (slot)
            drop_queued(slot, std::nullopt);
        slot = std::make_shared<queued>();
        slot->name = name;
        slot->token = token;
        slot->key = mine.key;
        slot->mine = mine.create_revision;
        slot->first_send = sent;
        slot->ttl = ttl;
        slot->retry = std::make_shared<asio::steady_timer>(ex);
        check_queued(slot);
    }
    void drop_queued(const std::shared_ptr<queued>& q, std::optional<watch_event> tell)
    {
        q->done = true;
        if (q->stream)
            q->stream->cancel();
        q->retry->cancel();
        auto it = queue.find({q->name, q->token});
        if (it != queue.end() && it->second == q)
            queue.erase(it);
        if (tell)
            if (auto w = tokened(q->name, q->token))
                notify(w, *tell);
    }
    void retry_queued(const std::shared_ptr<queued>& q)
    {
        q->retry->expires_after(q->pause.next(rng));
        q->retry->async_wait([self = shared_from_this(), q](error_code ec) {
            if (!ec && !q->done)
                self->check_queued(q);
        });
    }
    void check_queued(const std::shared_ptr<queued>& q)
    {
        if (q->done || q->checking)
            return;
        if (!tokened(q->name, q->token))
            return drop_queued(q, std::nullopt);  // nobody listens for the grant any more
        q->checking = true;
        request(txn_path, predecessor_txn(q->key, q->mine, range_of(q->name)), [this, q](error_code ec, http_reply r) {
            q->checking = false;
            if (q->done || closed)
                return;
            reply_error err;
            predecessor_reply p;
            ec = decode(
                ec, r, [&](std::string_view b, reply_error& e) { return parse_predecessor(b, p, e); }, err);
            if (ec)
                return retry_queued(q);
            q->pause.reset();
            if (!p.mine_exists)
                return drop_queued(q, watch_event::resync);  // withdrawn, or gone with its lease
            if (!p.predecessor) {
                // Ours is the first key: the name is ours, its lease the session's.
                grant_notice g{static_cast<std::uint64_t>(q->mine),
                               std::min(q->ttl, ms_until(life.raw_deadline(), q->first_send)), q->key,
                               static_cast<std::uint64_t>(lease)};
                auto w = tokened(q->name, q->token);
                drop_queued(q, std::nullopt);
                if (w)
                    notify(w, watch_event::granted, std::move(g));
                return;
            }
            auto pred = p.predecessor->key;
            q->checked_rev = p.revision;
            if (q->stream && q->watching == pred)
                return;  // a re-check after the watch was created: the same key, watched
            if (q->stream)
                q->stream->cancel();
            q->watching = pred;
            // From now, not from the check's revision: a watch that starts in the past waits
            // for etcd's catch-up loop (every 100 ms). A deletion between the check and the
            // watch is caught by checking again once the watch exists (see `created`).
            q->stream = watch_stream::start(
                ex, cfg, pool.pick(), watch_create_request(pred, {}, 0),
                [self = weak_from_this(), q, pred](error_code ec, const watch_message& m) {
                    auto s = self.lock();
                    if (!s || q->done)
                        return;
                    if (ec) {
                        q->stream.reset();
                        return s->retry_queued(q);  // cut: look again (nothing is lost: the check reads)
                    }
                    bool gone =
                        m.canceled || m.compact_revision > 0 ||
                        std::any_of(m.deleted.begin(), m.deleted.end(), [&](auto& kv) { return kv.key == pred; });
                    if (gone) {
                        q->stream->cancel();
                        q->stream.reset();
                        return s->check_queued(q);
                    }
                    if (m.created && m.revision > q->checked_rev)
                        s->check_queued(q);  // something happened between the check and the watch
                });
        });
    }

    void acquire(const lease_request& req, asio::any_completion_handler<acquire_signature> h, bool retried)
    {
        if (!retried)
            ++acquiring[{req.name, req.token}];
        // std::function wants a copyable target: the handler rides in a shared_ptr.
        auto hp = std::make_shared<asio::any_completion_handler<acquire_signature>>(std::move(h));
        ensure_session(req.ttl.count() / 1000, [self = shared_from_this(), req, retried, hp](error_code ec) {
            if (ec)
                return self->acquired(req, std::move(*hp), ec, acquire_result{});
            self->send_acquire(req, std::move(*hp), retried);
        });
    }
    // Completes an acquire, then lets the releases of its token that waited for it go.
    void acquired(const lease_request& req, asio::any_completion_handler<acquire_signature> h, error_code ec,
                  acquire_result res)
    {
        dlock::detail::post_completion(ex, std::move(h), ec, std::move(res));
        std::pair<std::string, std::string> id{req.name, req.token};
        if (auto it = acquiring.find(id); it != acquiring.end() && --it->second <= 0) {
            acquiring.erase(it);
            if (auto w = after_acquire.find(id); w != after_acquire.end()) {
                auto run = std::move(w->second);
                after_acquire.erase(w);
                for (auto& f : run)
                    f();
            }
        }
    }
    // `again`: asked again after a transient failure (the first try may have run).
    void release(const lease_key& k, asio::any_completion_handler<bool_signature> h, bool again = false)
    {
        if (auto q = queue.find({k.name, k.token}); q != queue.end())
            drop_queued(q->second, std::nullopt);
        if (closed)
            return dlock::detail::post_completion(ex, std::move(h), error_code(error::closed), false);
        if (acquiring.count({k.name, k.token})) {
            auto hp = std::make_shared<asio::any_completion_handler<bool_signature>>(std::move(h));
            after_acquire[{k.name, k.token}].push_back(
                [self = shared_from_this(), k, hp] { self->release(k, std::move(*hp)); });
            return;
        }
        auto key = k.ref.empty() ? key_for(k.name, k.token) : k.ref;
        if (key.empty())
            return dlock::detail::post_completion(ex, std::move(h), error_code(), false);
        request(
            txn_path, release_txn(key, range_of(k.name), k.token),
            [this, k, name = k.name, token = k.token, key, again, l = lease, h = std::move(h)](error_code ec,
                                                                                               http_reply r) mutable {
                reply_error err;
                bool deleted = false, held = false;
                ec = decode(
                    ec, r, [&](std::string_view b, reply_error& e) { return parse_release(b, key, deleted, held, e); },
                    err);
                if (ec && is_transient(ec) && !closed && l != 0 && lease == l)
                    return release_later(k, std::move(h));
                if (!ec && again && !deleted)
                    held = true;  // gone when asked again: most likely the first try, whose reply was lost, did it
                if (!ec)
                    free_slot(name, token);  // deleted, or not ours: the token has no key now
                if (!ec && held)             // our own tokened watchers hear it here, not on a stream
                    for (auto& [id, w] : watchers)
                        if (w->name == name && !w->token.empty())
                            notify(w, watch_event::released);
                dlock::detail::post_completion(ex, std::move(h), ec, held);
            },
            milliseconds(0), false, false);  // not idempotent: a second try finds nothing
    }
    // The key lives as long as the lease does, in front of every contender: a release that
    // may not have run is asked again while the lease lives (its end deletes the key).
    void release_later(const lease_key& k, asio::any_completion_handler<bool_signature> h)
    {
        auto hp = std::make_shared<asio::any_completion_handler<bool_signature>>(std::move(h));
        auto t = std::make_shared<asio::steady_timer>(ex, std::max(milliseconds(10), life.ttl() / 20));
        t->async_wait([self = shared_from_this(), t, k, hp](error_code) { self->release(k, std::move(*hp), true); });
    }
    void send_acquire(const lease_request& req, asio::any_completion_handler<acquire_signature> h, bool retried)
    {
        auto range = range_of(req.name);
        auto key = assign_key(req.name, req.token);
        auto l = lease;
        auto sent = clock_type::now();
        auto body =
            req.queue ? queued_acquire_txn(key, range, req.token, l) : try_acquire_txn(key, range, req.token, l);
        request(txn_path, std::move(body),
                [this, req, retried, key, l, sent, h = std::move(h)](error_code ec, http_reply r) mutable {
                    reply_error err;
                    acquire_reply a;
                    ec = decode(
                        ec, r,
                        [&](std::string_view b, reply_error& e) {
                            return parse_acquire(b, req.queue, key, req.token, l, a, e);
                        },
                        err);
                    if (ec == error::session_lost) {
                        if (lease == l)
                            session_gone(err.text);
                        if (!retried)  // our lease vanished under us: once more, with a new one
                            return acquire(req, std::move(h), true);
                    }
                    if (ec)
                        return acquired(req, std::move(h), ec, acquire_result{});
                    acquire_result res;
                    bool ours = a.mine && a.mine->value == req.token;
                    if (ours && a.owner && a.owner->key == key) {
                        res.acquired = true;
                        res.fencing_token = static_cast<std::uint64_t>(a.mine->create_revision);
                        // At least 1 ms: 0 would read as "as asked"; a lease this short is a late reply.
                        res.granted_ttl =
                            std::max(milliseconds(1), std::min(req.ttl, ms_until(life.raw_deadline(), sent)));
                        res.lease_ref = key;
                        res.session = static_cast<std::uint64_t>(l);
                        if (auto q = queue.find({req.name, req.token}); q != queue.end())
                            drop_queued(q->second, std::nullopt);
                    } else {
                        if (a.owner && a.owner->lease == l)
                            contended[req.name] = true;  // our own holder's next confirmation says so
                        if (req.queue && ours)
                            start_queued(req.name, req.token, *a.mine, sent, req.ttl);
                        else if (!a.mine && lease == l)
                            free_slot(req.name, req.token);  // nothing was put: the slot is free
                    }
                    acquired(req, std::move(h), error_code(), std::move(res));
                });
    }

    // Untokened watches: one stream of deletions under the name.
    void start_name_stream(const std::string& name)
    {
        auto& ns = names[name];
        if (!ns.retry)
            ns.retry = std::make_shared<asio::steady_timer>(ex);
        auto range = range_of(name);
        ns.stream =
            watch_stream::start(ex, cfg, pool.pick(), watch_create_request(range, prefix_end(range), ns.next_rev),
                                [self = weak_from_this(), name](error_code ec, const watch_message& m) {
                                    auto s = self.lock();
                                    if (!s)
                                        return;
                                    auto it = s->names.find(name);
                                    if (it == s->names.end())
                                        return;
                                    auto& ns = it->second;
                                    if (ec || m.canceled || m.compact_revision > 0) {
                                        if (ns.stream)
                                            ns.stream->cancel();
                                        ns.stream.reset();
                                        bool lost_events = m.compact_revision > 0 || ns.next_rev == 0;
                                        if (m.compact_revision > 0)
                                            ns.next_rev = 0;  // from now: what was compacted is gone
                                        if (ns.created && lost_events)
                                            s->tell_name(name, watch_event::resync);
                                        ns.retry->expires_after(ns.pause.next(s->rng));
                                        ns.retry->async_wait([w = std::weak_ptr<impl>(s), name](error_code ec) {
                                            auto s = w.lock();
                                            if (!ec && s && !s->closed && s->names.count(name))
                                                s->start_name_stream(name);
                                        });
                                        return;
                                    }
                                    ns.pause.reset();
                                    if (m.revision > 0)
                                        ns.next_rev = m.revision + 1;
                                    if (m.created) {
                                        ns.created = true;
                                        for (auto& [id, w] : s->watchers)
                                            if (w->name == name && w->token.empty() && !w->ready) {
                                                w->ready = true;
                                                s->notify(w, watch_event::ready);
                                            }
                                    }
                                    if (!m.deleted.empty())
                                        s->tell_name(name, watch_event::released);
                                });
    }
    void tell_name(const std::string& name, watch_event ev)
    {
        for (auto& [id, w] : watchers)
            if (w->name == name && w->token.empty() && w->ready)
                notify(w, ev);
    }
};

// =====================================================================================

etcd_store::etcd_store(asio::any_io_executor ex, etcd::config cfg) : impl_(std::make_shared<impl>(ex, std::move(cfg)))
{
    impl_->owner = this;
}

etcd_store::~etcd_store()
{
    close();
    impl_->owner = nullptr;
}

asio::any_io_executor etcd_store::get_executor() const
{
    return impl_->ex;
}

store_traits etcd_store::traits() const noexcept
{
    store_traits t;
    t.direct_handoff = true;  // the key after the holder's is the next holder, at the release
    t.inherent_queue = true;
    t.live = liveness::per_session;
    t.confirms_leases = true;
    t.ttl_granularity = std::chrono::seconds(1);
    t.min_ttl = std::chrono::seconds(1);
    t.max_ttl = std::chrono::seconds(9'000'000'000LL);  // etcd's MaxLeaseTTL
    return t;
}

std::string etcd_store::describe() const
{
    return "etcd " + etcd::to_url(impl_->cfg);
}

std::string etcd_store::key_of(const std::string& name, const std::string& token) const
{
    return impl_->key_for(name, token);
}

std::string etcd_store::current_member() const
{
    return impl_->pool.current();
}

session_info etcd_store::session() const noexcept
{
    return impl_->lease ? impl_->info() : session_info{};
}

store::watch_id etcd_store::watch_session(std::function<void(session_event, const session_info&)> cb)
{
    auto id = impl_->next_id++;
    impl_->session_watchers.emplace(id, std::move(cb));
    return id;
}

store::watch_id etcd_store::watch(const std::string& name, const std::string& token, watch_callback cb)
{
    auto& m = *impl_;
    auto id = m.next_id++;
    auto w = std::make_shared<impl::watcher>(impl::watcher{name, token, std::move(cb)});
    m.watchers.emplace(id, w);
    if (m.closed)
        return id;
    if (!token.empty()) {
        w->ready = true;
        m.notify(w, watch_event::ready);
        return id;
    }
    auto it = m.names.find(name);
    if (it != m.names.end() && it->second.created && it->second.stream) {
        w->ready = true;
        m.notify(w, watch_event::ready);
    } else if (it == m.names.end()) {
        m.start_name_stream(name);
    }
    return id;
}

void etcd_store::unwatch(watch_id id)
{
    auto& m = *impl_;
    if (m.session_watchers.erase(id))
        return;
    auto it = m.watchers.find(id);
    if (it == m.watchers.end())
        return;
    auto w = it->second;
    w->alive = false;
    m.watchers.erase(it);
    if (!w->token.empty()) {
        if (auto q = m.queue.find({w->name, w->token}); q != m.queue.end() && !m.tokened(w->name, w->token))
            m.drop_queued(q->second, std::nullopt);
        return;
    }
    bool others = std::any_of(m.watchers.begin(), m.watchers.end(),
                              [&](auto& e) { return e.second->name == w->name && e.second->token.empty(); });
    if (!others) {
        if (auto n = m.names.find(w->name); n != m.names.end()) {
            if (n->second.stream)
                n->second.stream->cancel();
            n->second.retry->cancel();
            m.names.erase(n);
        }
    }
}

void etcd_store::close()
{
    auto& m = *impl_;
    if (m.closed)
        return;
    m.closed = true;
    m.keepalive_timer.cancel();
    m.deadline_timer.cancel();
    for (auto& [k, q] : std::map(m.queue))
        m.drop_queued(q, std::nullopt);
    for (auto& [n, ns] : m.names) {
        if (ns.stream)
            ns.stream->cancel();
        if (ns.retry)
            ns.retry->cancel();
    }
    m.names.clear();
    for (auto& [id, w] : m.watchers)
        w->alive = false;
    m.fail_session_waiters(error::closed);
    if (!m.lease)
        return m.pool.close();
    // Every key of ours goes with the lease, now rather than at its expiry; then the pool closes.
    auto id = std::exchange(m.lease, 0);
    m.life.end();
    m.pool.post(
        revoke_path, lease_id_request(id), [self = impl_](error_code, http_reply) { self->pool.close(); },
        milliseconds(1000));
}

// ---- operations ----------------------------------------------------------------------

namespace {

template <class H, class... Args>
void complete(const asio::any_io_executor& ex, H& h, Args&&... args)
{
    dlock::detail::post_completion(ex, std::move(h), std::forward<Args>(args)...);
}

}  // namespace

void etcd_store::do_connect(asio::any_completion_handler<connect_signature> h)
{
    auto& m = *impl_;
    if (m.closed)
        return complete(m.ex, h, error_code(error::closed));
    if (m.probed)
        return complete(m.ex, h, error_code());
    // A connect checks that the members answer as etcd; the lease waits for the first acquire.
    m.request("/v3/maintenance/status", "{}", [self = impl_, h = std::move(h)](error_code ec, http_reply r) mutable {
        reply_error err;
        if (auto e = self->reply_failed(ec, r, err))
            return complete(self->ex, h, e);
        if (r.body.find("\"version\"") == std::string::npos) {
            self->set_text("etcd " + self->pool.current() + ": the server did not answer as an etcd v3 gateway");
            return complete(self->ex, h, error_code(error::protocol_error));
        }
        self->probed = true;
        complete(self->ex, h, error_code());
    });
}

void etcd_store::do_try_acquire(const lease_request& req, asio::any_completion_handler<acquire_signature> h)
{
    auto& m = *impl_;
    if (m.closed)
        return complete(m.ex, h, error_code(error::closed), acquire_result{});
    if (req.kind != lease_kind::mutex) {
        set_error_text("etcd: this store serves mutex leases only");
        return complete(m.ex, h, error_code(error::not_supported), acquire_result{});
    }
    if (req.ttl.count() <= 0 || req.ttl.count() % 1000 != 0 || req.ttl > traits().max_ttl) {
        set_error_text("etcd: leases are whole seconds from 1 s (got " + std::to_string(req.ttl.count()) + " ms)");
        return complete(m.ex, h, error_code(error::invalid_lease), acquire_result{});
    }
    m.acquire(req, std::move(h), false);
}

void etcd_store::do_renew(const lease_key& k, std::chrono::milliseconds,
                          asio::any_completion_handler<renew_signature> h)
{
    auto& m = *impl_;
    if (m.closed)
        return complete(m.ex, h, error_code(error::closed), renew_result{});
    auto key = k.ref.empty() ? m.key_for(k.name, k.token) : k.ref;
    if (key.empty())
        return complete(m.ex, h, error_code(), renew_result{});  // no lease: nothing of ours exists
    m.request(txn_path, confirm_txn(key, m.range_of(k.name), k.token),
              [self = impl_, name = k.name, h = std::move(h)](error_code ec, http_reply r) mutable {
                  reply_error err;
                  confirm_reply c;
                  ec = self->decode(
                      ec, r, [&](std::string_view b, reply_error& e) { return parse_confirm(b, c, e); }, err);
                  if (ec)
                      return complete(self->ex, h, ec, renew_result{});
                  renew_result res{c.owned, c.owned && c.count > 1};
                  if (auto it = self->contended.find(name); c.owned && it != self->contended.end()) {
                      res.contended = true;  // another token of this store asked meanwhile
                      self->contended.erase(it);
                  }
                  complete(self->ex, h, error_code(), res);
              });
}

void etcd_store::do_release(const lease_key& k, asio::any_completion_handler<bool_signature> h)
{
    impl_->release(k, std::move(h));
}

void etcd_store::do_force_release(const std::string& name, asio::any_completion_handler<bool_signature> h)
{
    auto& m = *impl_;
    if (m.closed)
        return complete(m.ex, h, error_code(error::closed), false);
    m.request(range_path, range_request(m.range_of(name), 1),
              [self = impl_, h = std::move(h)](error_code ec, http_reply r) mutable {
                  reply_error err;
                  range_reply rr;
                  ec = self->decode(
                      ec, r, [&](std::string_view b, reply_error& e) { return parse_range(b, rr, e); }, err);
                  if (ec || rr.kvs.empty())
                      return complete(self->ex, h, ec, false);
                  // Deletes the holder's key only if it is still that key (not a successor's).
                  self->request(
                      txn_path, delete_if_created_txn(rr.kvs[0].key, rr.kvs[0].create_revision),
                      [self, h = std::move(h)](error_code ec, http_reply r) mutable {
                          reply_error err;
                          bool deleted = false;
                          ec = self->decode(
                              ec, r, [&](std::string_view b, reply_error& e) { return parse_succeeded(b, deleted, e); },
                              err);
                          complete(self->ex, h, ec, deleted);
                      });
              });
}

void etcd_store::do_status(const std::string& name, asio::any_completion_handler<status_signature> h)
{
    auto& m = *impl_;
    if (m.closed)
        return complete(m.ex, h, error_code(error::closed), lock_status{});
    m.request(range_path, range_request(m.range_of(name)),
              [self = impl_, h = std::move(h)](error_code ec, http_reply r) mutable {
                  reply_error err;
                  range_reply rr;
                  ec = self->decode(
                      ec, r, [&](std::string_view b, reply_error& e) { return parse_range(b, rr, e); }, err);
                  lock_status s;
                  if (ec || rr.kvs.empty())
                      return complete(self->ex, h, ec, s);
                  const auto& first = rr.kvs.front();
                  s.held = true;
                  s.holder = first.value;
                  s.key = first.key;
                  s.fencing_token = static_cast<std::uint64_t>(first.create_revision);
                  for (auto& kv : rr.kvs)
                      s.last_fencing_token =
                          std::max(s.last_fencing_token, static_cast<std::uint64_t>(kv.create_revision));
                  s.queued = rr.kvs.size() - 1;
                  // The holder's remaining lease, for operators. This store's own lease: to the
                  // millisecond, as its keep-alives confirmed it.
                  if (first.lease != 0 && first.lease == self->lease) {
                      s.ttl = ms_until(self->life.deadline(), clock_type::now());
                      return complete(self->ex, h, error_code(), std::move(s));
                  }
                  // Another client's: etcd tells whole seconds, rounded down (a 1 s lease always
                  // reads 0): the middle of that second, no more than the lease granted.
                  self->request(ttl_path, lease_id_request(first.lease),
                                [self, s, h = std::move(h)](error_code ec, http_reply r) mutable {
                                    lease_reply l;
                                    reply_error err;
                                    if (!ec && r.status == 200 && parse_lease(r.body, l, err) && l.ttl >= 0) {
                                        s.ttl = std::chrono::seconds(l.ttl) + milliseconds(500);
                                        if (l.granted_ttl > 0)
                                            s.ttl = std::min<milliseconds>(s.ttl, std::chrono::seconds(l.granted_ttl));
                                    }
                                    complete(self->ex, h, error_code(), std::move(s));
                                });
              });
}

}  // namespace dlock
