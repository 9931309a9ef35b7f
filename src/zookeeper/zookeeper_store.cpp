// SPDX-License-Identifier: BSL-1.0
#include <dlock/error.hpp>
#include <dlock/zookeeper/store.hpp>

#include "common/post_completion.hpp"
#include "common/session_life.hpp"
#include "zookeeper/acquire_round.hpp"
#include "zookeeper/client.hpp"
#include "zookeeper/recipe.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <map>
#include <optional>

namespace dlock {

namespace asio = boost::asio;
using boost::system::error_code;
using std::chrono::milliseconds;
using clock_type = std::chrono::steady_clock;
using zookeeper::detail::client;
using zookeeper::detail::node_stat;
namespace recipe = zookeeper::recipe;
using zookeeper::acquire_next;
using zookeeper::acquire_round;
using zookeeper::reply;

namespace {

// The session timeouts the handshake can carry (a signed 32-bit count of milliseconds) and
// the least the C client can complete a handshake with (it allows a fraction of it).
constexpr milliseconds max_session_timeout{2'147'483'647};
constexpr milliseconds min_session_ask{100};
// A server closes the connection on a request larger than its jute.maxbuffer (1 MiB - 1
// unless configured): the same request would then fail as a lost connection for ever. A
// contender's create is its path, node name, token and some 200 bytes of framing.
constexpr std::size_t max_request = 0xfffff;
constexpr std::size_t request_overhead = 512;

// Why a name's lock path cannot be sent (empty if it can), for the error text.
std::string too_long(const std::string& path, std::size_t token_size)
{
    auto size = path.size() + 64 + token_size + request_overhead;
    if (size <= max_request)
        return {};
    return "zookeeper: the lock path of " + std::to_string(path.size()) +
           " bytes makes a request larger than ZooKeeper's servers take (jute.maxbuffer, " +
           std::to_string(max_request) + " bytes unless configured): a lock name this long cannot be used";
}

milliseconds ms_until(clock_type::time_point t, clock_type::time_point from)
{
    return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(t - from));
}

template <class H, class... Args>
void complete(const asio::any_io_executor& ex, H& h, Args&&... args)
{
    dlock::detail::post_completion(ex, std::move(h), std::forward<Args>(args)...);
}

}  // namespace

struct zookeeper_store::impl : std::enable_shared_from_this<impl> {
    impl(asio::any_io_executor e, zookeeper::config c)
        : ex(e), cfg(std::move(c)), resolver(e), connect_timer(e), deadline_timer(e), ping_timer(e)
    {
    }

    asio::any_io_executor ex;
    zookeeper::config cfg;
    zookeeper_store* owner = nullptr;
    bool closed = false;
    asio::ip::tcp::resolver resolver;

    // ---- the session ----
    std::shared_ptr<client> zk;
    std::int64_t session_id = 0;  // 0: none trusted
    milliseconds timeout{0};      // negotiated
    bool opening = false;
    dlock::detail::session_life life;  // its events, ping schedule and deadline
    std::vector<std::function<void(error_code)>> session_waiters;
    asio::steady_timer connect_timer, deadline_timer, ping_timer;
    std::map<watch_id, std::function<void(session_event, const session_info&)>> session_watchers;

    // ---- per (name, token): the node this session made for it ----
    struct node_state {
        std::string node;  // full path; empty while unknown
        std::int64_t czxid = 0;
        bool uncertain = false;  // a create's reply was lost: look for the guid before creating again
        bool held = false;
    };
    std::map<std::pair<std::string, std::string>, node_state> nodes;

    // ---- watches ----
    struct watcher {
        std::string name, token;
        watch_callback cb;
        bool alive = true;
    };
    std::map<watch_id, std::shared_ptr<watcher>> watchers;
    watch_id next_id = 1;

    // A queued token waiting for the node before its own to go.
    struct queued {
        std::string name, token, path;
        milliseconds ttl{0};
        std::int64_t session = 0;
        bool done = false;
    };
    std::map<std::pair<std::string, std::string>, std::shared_ptr<queued>> queue;
    // Untokened watchers of a name: one children watch, re-armed on each change.
    struct name_watch {
        std::vector<std::string> last;
        bool armed = false;
        std::uint64_t epoch = 0;
    };
    std::map<std::string, name_watch> names;
    std::map<std::string, bool> contended;
    std::map<std::pair<std::string, std::string>, int> acquiring;
    std::map<std::pair<std::string, std::string>, std::vector<std::function<void()>>> after_acquire;

    // ---------------------------------------------------------------------------------
    // Any answered request dates the session (the client keeps the latest one's send time).
    void heard()
    {
        if (zk)
            life.heard(zk->confirmed());
    }
    clock_type::time_point deadline()
    {
        heard();
        return life.deadline();
    }
    session_info info()
    {
        heard();
        return life.info();
    }
    void set_text(std::string t)
    {
        if (owner)
            owner->set_error_text(std::move(t));
    }
    // A ZooKeeper return code as the contract's error.
    error_code to_error(int rc, const std::string& what)
    {
        if (rc == ZOK)
            return {};
        set_text("zookeeper: " + what + ": " + zerror(rc));
        if (closed)
            return error::closed;
        switch (rc) {
        case ZCONNECTIONLOSS:
        case ZCLOSING:
        case ZSESSIONEXPIRED:
        case ZINVALIDSTATE:
        case ZSESSIONMOVED: return error::connection_lost;
        case ZOPERATIONTIMEOUT: return error::timeout;
        case ZNOAUTH:
        case ZAUTHFAILED: return error::permission_denied;
        case ZNOCHILDRENFOREPHEMERALS: return error::wrong_type;
        case ZBADARGUMENTS: return error::invalid_request;
        default: return error::server_error;
        }
    }

    // ---- session -------------------------------------------------------------------
    void emit_session(session_event ev, const session_info& i)
    {
        for (auto& [id, cb] : std::map(session_watchers))  // a callback may unwatch
            if (session_watchers.count(id))
                cb(ev, i);
    }
    void ensure_session(std::function<void(error_code)> cont)
    {
        if (closed)
            return cont(error::closed);
        if (session_id)
            return cont({});
        session_waiters.push_back(std::move(cont));
        if (opening)
            return;
        opening = true;
        open_session();
    }
    void fail_session_waiters(error_code ec)
    {
        opening = false;
        connect_timer.cancel();
        auto w = std::move(session_waiters);
        session_waiters.clear();
        for (auto& c : w)
            c(ec);
    }
    // Host names resolved by Asio: the C client would resolve them with a blocking call.
    void open_session()
    {
        // The handshake carries the timeout as a 32-bit count of milliseconds: a longer one
        // cannot even be asked for (it wrapped, and the handshake never completed).
        if (cfg.session_timeout > max_session_timeout) {
            set_text("zookeeper: a session timeout of " + std::to_string(cfg.session_timeout.count()) +
                     " ms is more than ZooKeeper can negotiate (at most " +
                     std::to_string(max_session_timeout.count()) +
                     " ms; the servers grant 2 to 20 ticks unless configured)");
            return fail_session_waiters(error::invalid_lease);
        }
        auto left = std::make_shared<std::size_t>(cfg.servers.size());
        auto hosts = std::make_shared<std::vector<std::string>>(cfg.servers.size());
        auto failed = std::make_shared<std::string>();
        connect_timer.expires_after(cfg.connect_timeout);
        connect_timer.async_wait([w = weak_from_this()](error_code ec) {
            auto s = w.lock();
            if (ec || !s || !s->opening)
                return;
            s->set_text("zookeeper " + zookeeper::to_url(s->cfg) + ": no server completed a session handshake within " +
                        std::to_string(s->cfg.connect_timeout.count()) +
                        " ms (servers down, no quorum, or not ZooKeeper)");
            s->drop_client();
            s->fail_session_waiters(error::connect_failed);
        });
        for (std::size_t i = 0; i < cfg.servers.size(); ++i) {
            const auto& srv = cfg.servers[i];
            resolver.async_resolve(srv.host, std::to_string(srv.port),
                                   [self = shared_from_this(), i, left, hosts,
                                    failed](error_code ec, asio::ip::tcp::resolver::results_type r) {
                                       if (!self->opening || self->closed)
                                           return;
                                       if (!ec && !r.empty()) {
                                           auto ep = r.begin()->endpoint();
                                           auto a = ep.address().to_string();
                                           (*hosts)[i] = (ep.address().is_v6() ? "[" + a + "]" : a) + ":" +
                                                         std::to_string(ep.port());
                                       } else {
                                           *failed = self->cfg.servers[i].host + ": " + ec.message();
                                       }
                                       if (--*left)
                                           return;
                                       std::string list;
                                       for (auto& h : *hosts)
                                           if (!h.empty())
                                               list += (list.empty() ? "" : ",") + h;
                                       if (list.empty()) {
                                           self->set_text("zookeeper: no server name resolved (" + *failed + ")");
                                           return self->fail_session_waiters(error::resolve_failed);
                                       }
                                       self->start_client(list + self->cfg.chroot);
                                   });
        }
    }
    void start_client(const std::string& hosts)
    {
        std::string err;
        // Below the floor the C client gives up on the handshake before the servers can
        // answer (it waits a fraction of the timeout): the floor is asked for instead, and
        // the servers' grant then shows the timeout asked for is not to be had.
        zk = client::open(
            ex, hosts, std::max(cfg.session_timeout, min_session_ask),
            [w = weak_from_this(), gen = std::make_shared<int>(0)](int state) {
                if (auto s = w.lock())
                    s->on_state(state);
            },
            err);
        if (!zk) {
            set_text("zookeeper: " + err);
            return fail_session_waiters(error::invalid_request);
        }
    }
    // Closes the current client later (never inside its own callbacks' caller frames).
    void drop_client()
    {
        if (!zk)
            return;
        auto old = std::move(zk);
        zk.reset();
        old->close();
        asio::post(ex, [old] {});
    }
    void on_state(int state)
    {
        if (closed || !zk)
            return;
        if (state == ZOO_CONNECTED_STATE) {
            auto id = zk->session_id();
            if (!session_id && opening) {
                timeout = zk->negotiated_timeout();
                if (timeout != cfg.session_timeout) {
                    auto asked = std::max(cfg.session_timeout, min_session_ask);
                    set_text("zookeeper: a session timeout of " + std::to_string(cfg.session_timeout.count()) +
                             " ms is outside the servers' bounds (asked for " + std::to_string(asked.count()) +
                             " ms, they granted " + std::to_string(timeout.count()) +
                             " ms; the bounds are 2 to 20 ticks unless configured)");
                    drop_client();
                    return fail_session_waiters(error::invalid_lease);
                }
                // The handshake's send time is the library's: date the session by a request
                // of ours instead, answered after the session exists.
                zk->exists("/", [w = weak_from_this(), id, c = zk](int rc, node_stat) {
                    auto s = w.lock();
                    if (!s || s->closed || s->zk != c || !s->opening)
                        return;
                    if (rc != ZOK && rc != ZNONODE) {
                        s->drop_client();
                        return s->fail_session_waiters(s->to_error(rc, "confirming a new session"));
                    }
                    s->session_id = id;
                    s->opening = false;
                    s->connect_timer.cancel();
                    auto every = std::max(milliseconds(20), s->timeout / 3);
                    auto up =
                        s->life.opened(static_cast<std::uint64_t>(id), s->zk->confirmed(), s->timeout, {every, every});
                    s->arm_ping();
                    s->arm_deadline();
                    s->emit_session(up, s->info());
                    auto waiters = std::move(s->session_waiters);
                    s->session_waiters.clear();
                    for (auto& f : waiters)
                        f({});
                });
                return;
            }
            if (session_id && id == session_id)
                if (auto ev = life.reconnected())
                    emit_session(*ev, info());
            return;
        }
        if (state == ZOO_CONNECTING_STATE || state == ZOO_ASSOCIATING_STATE) {
            if (session_id)
                if (auto ev = life.unconfirmed(clock_type::now()))
                    emit_session(*ev, info());
            return;
        }
        if (state == ZOO_EXPIRED_SESSION_STATE)
            return session_gone("zookeeper: the servers expired session 0x" + hex(session_id));
        if (state == ZOO_AUTH_FAILED_STATE) {
            set_text("zookeeper: authentication failed");
            if (opening) {
                drop_client();
                return fail_session_waiters(error::auth_failed);
            }
            return session_gone("zookeeper: authentication failed");
        }
    }
    static std::string hex(std::int64_t v)
    {
        char buf[20];
        std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(v));
        return buf;
    }
    // A request of ours every third of the timeout: its reply confirms the session (the
    // C client's own pings are invisible to us).
    void arm_ping()
    {
        ping_timer.expires_at(life.next_keepalive());
        ping_timer.async_wait([w = weak_from_this(), id = session_id](error_code ec) {
            auto s = w.lock();
            if (ec || !s || s->closed || s->session_id != id || !s->zk)
                return;
            auto sent = clock_type::now();
            s->life.keepalive_sent(sent);
            s->zk->exists("/", [w, id, sent](int rc, node_stat) {
                auto s = w.lock();
                if (!s || s->closed || s->session_id != id || (rc != ZOK && rc != ZNONODE))
                    return;
                // Answered: the session lived at the send time; its locks' ends move with it.
                auto ev = s->life.confirmed(sent);
                s->arm_deadline();
                if (ev)
                    s->emit_session(*ev, s->info());
            });
            s->arm_ping();
        });
    }
    void arm_deadline()
    {
        if (!session_id)
            return;
        deadline_timer.expires_at(deadline());
        deadline_timer.async_wait([w = weak_from_this(), id = session_id](error_code ec) {
            auto s = w.lock();
            if (ec || !s || s->closed || s->session_id != id)
                return;
            s->heard();
            if (!s->life.expired(clock_type::now()))
                return s->arm_deadline();
            s->session_gone("zookeeper: no request was answered within the session timeout (" +
                            std::to_string(s->timeout.count()) + " ms) of session 0x" + hex(id));
        });
    }
    // The session ended or can no longer be trusted: every lock of it is lost at once, and
    // the old session is closed so that its nodes go now if the servers still keep them.
    void session_gone(std::string why)
    {
        if (!session_id)
            return;
        set_text(std::move(why));
        heard();
        auto old = life.end();
        session_id = 0;
        nodes.clear();
        ping_timer.cancel();
        deadline_timer.cancel();
        drop_client();
        for (auto& [id, cb] : std::map(session_watchers))
            if (session_watchers.count(id))
                cb(session_event::lost, old);
        for (auto& [k, q] : std::map(queue))
            drop_queued(q, watch_event::resync);
        for (auto& [name, nw] : names) {
            nw.armed = false;
            ++nw.epoch;
            tell_name(name, watch_event::resync);
        }
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
    void tell_name(const std::string& name, watch_event ev)
    {
        for (auto& [id, w] : watchers)
            if (w->name == name && w->token.empty())
                notify(w, ev);
    }
    std::string path_of(const std::string& name)
    {
        std::string why;
        return recipe::lock_path(cfg.root, name, why);
    }

    // Waits for the node before ours to go; then looks again (it may have been a waiter).
    void start_queued(const std::string& name, const std::string& token, milliseconds ttl)
    {
        auto& slot = queue[{name, token}];
        if (slot && !slot->done)
            return;
        slot = std::make_shared<queued>();
        slot->name = name;
        slot->token = token;
        slot->path = path_of(name);
        slot->ttl = ttl;
        slot->session = session_id;
        recheck(slot);
    }
    void drop_queued(const std::shared_ptr<queued>& q, std::optional<watch_event> tell)
    {
        q->done = true;
        auto it = queue.find({q->name, q->token});
        if (it != queue.end() && it->second == q)
            queue.erase(it);
        if (tell)
            if (auto w = tokened(q->name, q->token))
                notify(w, *tell);
    }
    void recheck(const std::shared_ptr<queued>& q)
    {
        if (q->done)
            return;
        if (!tokened(q->name, q->token))
            return drop_queued(q, std::nullopt);
        if (!zk || session_id != q->session)
            return drop_queued(q, watch_event::resync);
        zk->get_children(q->path, [self = shared_from_this(), q](int rc, std::vector<std::string> children) {
            if (q->done || self->closed)
                return;
            if (rc != ZOK || self->session_id != q->session)
                return self->drop_queued(q, watch_event::resync);  // the waiter asks again
            auto sorted = recipe::contenders(std::move(children));
            auto pos = recipe::find(sorted, q->token, q->session);
            if (!pos.found)
                return self->drop_queued(q, watch_event::resync);  // withdrawn or gone
            if (pos.first) {
                auto& ns = self->nodes[{q->name, q->token}];
                ns.held = true;
                grant_notice g{static_cast<std::uint64_t>(ns.czxid),
                               std::min(q->ttl, ms_until(self->deadline(), clock_type::now())), ns.node,
                               static_cast<std::uint64_t>(q->session)};
                auto w = self->tokened(q->name, q->token);
                self->drop_queued(q, std::nullopt);
                if (w && ns.czxid)
                    self->notify(w, watch_event::granted, std::move(g));
                else if (w)
                    self->notify(w, watch_event::resync);  // our node's czxid unknown: ask again
                return;
            }
            auto pred = q->path + "/" + pos.predecessor;
            self->zk->get(
                pred,
                [self, q](int rc, std::string, node_stat) {
                    if (q->done)
                        return;
                    if (rc == ZNONODE)
                        return self->recheck(q);  // gone between the two reads
                    if (rc != ZOK)
                        self->drop_queued(q, watch_event::resync);
                },
                [w = self->weak_from_this(), q](int) {
                    if (auto s = w.lock(); s && !q->done)
                        s->recheck(q);
                });
        });
    }

    // ---- acquire -------------------------------------------------------------------
    void acquire(const lease_request& req, asio::any_completion_handler<acquire_signature> h, bool retried)
    {
        if (!retried)
            ++acquiring[{req.name, req.token}];
        auto hp = std::make_shared<asio::any_completion_handler<acquire_signature>>(std::move(h));
        ensure_session([self = shared_from_this(), req, retried, hp](error_code ec) {
            if (ec)
                return self->acquired(req, std::move(*hp), ec, acquire_result{});
            self->send_acquire(req, std::move(*hp), retried);
        });
    }
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
    // The node's parents: the root chain as persistent nodes, the lock path as a container.
    void make_parents(const std::string& path, std::function<void(int)> done)
    {
        auto chain = std::make_shared<std::vector<std::string>>();
        for (auto at = path.find('/', 1); at != std::string::npos; at = path.find('/', at + 1))
            chain->push_back(path.substr(0, at));
        chain->push_back(path);
        make_parent(chain, 0, std::move(done));
    }
    void make_parent(std::shared_ptr<std::vector<std::string>> chain, std::size_t i, std::function<void(int)> done)
    {
        if (i == chain->size() || !zk)
            return done(zk ? ZOK : ZCLOSING);
        int flags = i + 1 == chain->size() ? ZOO_CONTAINER : ZOO_PERSISTENT;
        zk->create((*chain)[i], "", flags, [self = shared_from_this(), chain, i, done](int rc, std::string, node_stat) {
            if (rc != ZOK && rc != ZNODEEXISTS)
                return done(rc);
            self->make_parent(chain, i + 1, done);
        });
    }
    // One acquire round's replies (a create and a getChildren, or the latter alone).
    struct round_replies {
        bool create_sent = false;
        int create_rc = 1, children_rc = 1;  // 1: not come yet (0 is ZOK)
        std::string node;
        node_stat stat;
        std::vector<std::string> children;
    };
    static reply reply_of(int rc)
    {
        switch (rc) {
        case ZOK: return reply::ok;
        case ZNONODE: return reply::no_node;
        case ZCONNECTIONLOSS:
        case ZOPERATIONTIMEOUT: return reply::lost;
        default: return reply::failed;
        }
    }
    using acquire_handler = std::shared_ptr<asio::any_completion_handler<acquire_signature>>;
    // What an acquire round's replies mean is judge()'s (acquire_round.hpp); doing it is this.
    void judge_round(const lease_request& req, const std::string& path, const std::pair<std::string, std::string>& key,
                     std::int64_t sid, clock_type::time_point sent, const acquire_handler& hp, bool retried,
                     bool parents_made, round_replies& st)
    {
        acquire_round r{.closed = closed,
                        .same_session = session_id == sid,
                        .retried = retried,
                        .parents_made = parents_made,
                        .queue = req.queue,
                        .create = st.create_sent ? reply_of(st.create_rc) : reply::not_sent,
                        .children = reply_of(st.children_rc)};
        // A node this round made is ours whatever comes next: a release must find it.
        if (!closed && r.same_session && r.create == reply::ok && !st.node.empty())
            nodes[key] = node_state{.node = st.node, .czxid = st.stat.czxid};
        std::vector<std::string> sorted;
        if (r.children == reply::ok) {
            sorted = recipe::contenders(std::move(st.children));
            r.pos = recipe::find(sorted, req.token, sid);
        }
        auto known = nodes.find(key);
        r.czxid_known = known != nodes.end() && !known->second.node.empty() && known->second.czxid != 0;
        acquire_result res;
        switch (judge(r)) {
        case acquire_next::fail_closed: return acquired(req, std::move(*hp), error::closed, res);
        case acquire_next::start_over: return acquire(req, std::move(*hp), true);
        case acquire_next::fail_session_lost: return acquired(req, std::move(*hp), error::connection_lost, res);
        case acquire_next::make_parents:
            return make_parents(path, [self = shared_from_this(), req, hp, retried](int rc) {
                if (rc != ZOK && rc != ZNODEEXISTS)
                    return self->acquired(req, std::move(*hp), self->to_error(rc, "creating the lock path"),
                                          acquire_result{});
                self->send_acquire(req, std::move(*hp), retried, true);
            });
        case acquire_next::fail_create_uncertain:
            nodes[key].uncertain = true;  // it may exist: the guid finds it next time
            [[fallthrough]];
        case acquire_next::fail_create:
            return acquired(req, std::move(*hp), to_error(st.create_rc, "create in " + path), res);
        case acquire_next::fail_children:
            return acquired(req, std::move(*hp), to_error(st.children_rc, "children of " + path), res);
        case acquire_next::gone:
            nodes.erase(key);  // deleted under us (a forced release): nothing of ours is left
            return acquired(req, std::move(*hp), error_code(), res);
        case acquire_next::check_owner: return check_owner(req, path + "/" + r.pos.node, key, sid, hp, retried);
        case acquire_next::held: return grant(req, key, sid, sent, hp);
        case acquire_next::queued:
        case acquire_next::withdraw: return not_first(req, key, sorted.size(), hp);
        }
    }
    // Found by its guid after a lost reply: its czxid first, and only if this session owns
    // it (a node of a session given up is never adopted); then the round again.
    void check_owner(const lease_request& req, const std::string& node, const std::pair<std::string, std::string>& key,
                     std::int64_t sid, const acquire_handler& hp, bool retried)
    {
        nodes[key].node = node;
        zk->exists(node, [self = shared_from_this(), req, hp, key, retried, sid](int rc, node_stat s) {
            if (rc == ZOK && s.ephemeral_owner == sid && self->session_id == sid)
                self->nodes[key].czxid = s.czxid;
            else if (rc == ZOK || rc == ZNONODE)
                self->nodes.erase(key);  // gone, or not this session's: not ours to keep
            else                         // unanswered: it stays ours, for the release that follows the error
                return self->acquired(req, std::move(*hp), self->to_error(rc, "checking our node"), acquire_result{});
            self->send_acquire(req, std::move(*hp), retried, true);
        });
    }
    // Ours is the first node: the lock, good until the session's deadline at the most.
    void grant(const lease_request& req, const std::pair<std::string, std::string>& key, std::int64_t sid,
               clock_type::time_point sent, const acquire_handler& hp)
    {
        auto& ns = nodes[key];
        ns.held = true;
        acquire_result res;
        res.acquired = true;
        res.fencing_token = static_cast<std::uint64_t>(ns.czxid);
        res.granted_ttl = std::max(milliseconds(1), std::min(req.ttl, ms_until(deadline(), sent)));
        res.lease_ref = ns.node;
        res.session = static_cast<std::uint64_t>(sid);
        if (auto q = queue.find(key); q != queue.end())
            drop_queued(q->second, std::nullopt);
        acquired(req, std::move(*hp), error_code(), res);
    }
    // Not first: a queued acquire keeps its node and waits; a try withdraws it.
    void not_first(const lease_request& req, const std::pair<std::string, std::string>& key, std::size_t contenders,
                   const acquire_handler& hp)
    {
        if (contenders > 1)
            contended[req.name] = true;
        if (req.queue) {
            start_queued(req.name, req.token, req.ttl);
            return acquired(req, std::move(*hp), error_code(), acquire_result{});
        }
        // A try must leave nothing behind. Until the delete is answered the node stays ours:
        // an error here is followed by a release, which must find it (forgotten, it stayed
        // in front of every contender while the session lived).
        zk->remove(nodes[key].node, [self = shared_from_this(), req, hp, key](int rc) {
            if (rc != ZOK && rc != ZNONODE)
                return self->acquired(req, std::move(*hp), self->to_error(rc, "withdrawing"), acquire_result{});
            self->nodes.erase(key);
            self->acquired(req, std::move(*hp), error_code(), acquire_result{});
        });
    }
    void send_acquire(const lease_request& req, asio::any_completion_handler<acquire_signature> h, bool retried,
                      bool parents_made = false)
    {
        if (!zk || !session_id) {  // the session went between two steps of this acquire
            if (!retried)
                return acquire(req, std::move(h), true);
            return acquired(req, std::move(h), error::connection_lost, acquire_result{});
        }
        auto path = path_of(req.name);
        auto key = std::make_pair(req.name, req.token);
        auto sid = session_id;
        auto sent = clock_type::now();
        auto hp = std::make_shared<asio::any_completion_handler<acquire_signature>>(std::move(h));
        auto& ns = nodes[key];
        auto st = std::make_shared<round_replies>();
        auto evaluate = [self = shared_from_this(), req, path, key, sid, sent, hp, retried, st, parents_made] {
            if (st->create_rc == 1 || st->children_rc == 1)
                return;  // the other reply is still due
            self->judge_round(req, path, key, sid, sent, hp, retried, parents_made, *st);
        };
        if (!ns.node.empty() && !ns.uncertain) {
            st->create_rc = 0;  // ours exists: look where it stands
        } else if (ns.uncertain) {
            // A create whose reply was lost: find it by its guid before creating again, on a
            // server synced with the leader (this one may not have applied it yet).
            zk->sync(path, [](int) {});  // its failure fails the read behind it too
            zk->get_children(path, [self = shared_from_this(), req, hp, retried, key, path, parents_made,
                                    sid](int rc, std::vector<std::string> children) {
                if (rc != ZOK && rc != ZNONODE)
                    return self->acquired(req, std::move(*hp), self->to_error(rc, "children of " + path),
                                          acquire_result{});
                auto pos = recipe::find(recipe::contenders(std::move(children)), req.token, sid);
                auto& ns = self->nodes[key];
                ns.uncertain = false;
                if (pos.found)
                    ns.node = path + "/" + pos.node, ns.czxid = 0;
                else
                    ns.node.clear();
                self->send_acquire(req, std::move(*hp), retried, parents_made);
            });
            return;
        } else {
            st->create_sent = true;
            zk->create(path + "/" + recipe::node_prefix(req.token, sid), req.token, ZOO_EPHEMERAL_SEQUENTIAL,
                       [st, evaluate](int rc, std::string node, node_stat s) {
                           st->create_rc = rc;
                           st->node = std::move(node);
                           st->stat = s;
                           evaluate();
                       });
        }
        // Pipelined behind the create: the same session reads its own write.
        zk->get_children(path, [st, evaluate](int rc, std::vector<std::string> children) {
            st->children_rc = rc == ZNONODE && st->create_rc == ZNONODE ? ZOK : rc;
            st->children = std::move(children);
            evaluate();
        });
        (void)ns;
    }

    // `again`: asked again after a reply lost with its connection (release_later).
    void release(const lease_key& k, asio::any_completion_handler<bool_signature> h, bool again = false)
    {
        std::pair<std::string, std::string> key{k.name, k.token};
        if (auto q = queue.find(key); q != queue.end())
            drop_queued(q->second, std::nullopt);
        if (closed)
            return dlock::detail::post_completion(ex, std::move(h), error_code(error::closed), false);
        if (acquiring.count(key)) {
            auto hp = std::make_shared<asio::any_completion_handler<bool_signature>>(std::move(h));
            after_acquire[key].push_back([self = shared_from_this(), k, hp] { self->release(k, std::move(*hp)); });
            return;
        }
        auto it = nodes.find(key);
        std::string node = it != nodes.end() ? it->second.node : std::string();
        if (node.empty() && it != nodes.end() && it->second.uncertain && zk) {
            // A create whose reply was lost may have made a node: find it by the guid, on a
            // server synced with the leader (this one may not have applied it yet).
            auto path = path_of(k.name);
            auto hp = std::make_shared<asio::any_completion_handler<bool_signature>>(std::move(h));
            zk->sync(path, [](int) {});  // its failure fails the read behind it too
            zk->get_children(path, [self = shared_from_this(), k, key, path, hp,
                                    sid = session_id](int rc, std::vector<std::string> c) {
                if (self->release_later(rc, sid, k, hp))
                    return;
                if (rc != ZOK && rc != ZNONODE)
                    return dlock::detail::post_completion(self->ex, std::move(*hp),
                                                          self->to_error(rc, "children of " + path), false);
                auto pos = recipe::find(recipe::contenders(std::move(c)), k.token, sid);
                auto& ns = self->nodes[key];
                ns.uncertain = false;
                if (pos.found)
                    ns.node = path + "/" + pos.node;
                else
                    self->nodes.erase(key);
                self->release(k, std::move(*hp));
            });
            return;
        }
        if (node.empty() || !zk || !session_id) {
            nodes.erase(key);
            return dlock::detail::post_completion(ex, std::move(h), error_code(), false);
        }
        bool held = it->second.held;
        auto hp = std::make_shared<asio::any_completion_handler<bool_signature>>(std::move(h));
        zk->remove(node, [self = shared_from_this(), k, key, held, name = k.name, token = k.token, hp, again,
                          sid = session_id](int rc) {
            if (self->release_later(rc, sid, k, hp))
                return;
            if (rc != ZOK && rc != ZNONODE)
                return dlock::detail::post_completion(self->ex, std::move(*hp), self->to_error(rc, "delete"), false);
            self->nodes.erase(key);
            // Gone when asked again: most likely the first delete, whose reply was lost, did it.
            bool was = (rc == ZOK || (again && rc == ZNONODE)) && held;
            if (was)  // this store's watchers hear it here (an untokened one also through its watch)
                for (auto& [id, w] : self->watchers)
                    if (w->name == name && w->token != token)
                        self->notify(w, watch_event::released);
            dlock::detail::post_completion(self->ex, std::move(*hp), error_code(), was);
        });
    }

    // The connection went under a release while the session lives on, and its node with it:
    // that node would stay in front of every contender. Asked again until the session is
    // answered or gone (its end deletes the node; the deadline timer bounds the wait).
    bool release_later(int rc, std::int64_t sid, const lease_key& k,
                       const std::shared_ptr<asio::any_completion_handler<bool_signature>>& hp)
    {
        if ((rc != ZCONNECTIONLOSS && rc != ZOPERATIONTIMEOUT) || closed || !sid || session_id != sid)
            return false;
        auto t = std::make_shared<asio::steady_timer>(ex, std::max(milliseconds(10), timeout / 20));
        t->async_wait([self = shared_from_this(), t, k, hp](error_code) { self->release(k, std::move(*hp), true); });
        return true;
    }

    // Untokened watches: the name's children, watched and re-read on each change.
    void arm_name(const std::string& name)
    {
        auto it = names.find(name);
        if (it == names.end() || closed)
            return;
        auto epoch = ++it->second.epoch;
        it->second.armed = true;
        ensure_session([self = shared_from_this(), name, epoch](error_code ec) {
            auto it = self->names.find(name);
            if (it == self->names.end() || it->second.epoch != epoch)
                return;
            if (ec) {
                it->second.armed = false;
                return;  // the watchers learn nothing until the next session: they fall back on their timers
            }
            auto path = self->path_of(name);
            auto on_change = [w = self->weak_from_this(), name, epoch](int) {
                auto s = w.lock();
                if (!s)
                    return;
                auto it = s->names.find(name);
                if (it != s->names.end() && it->second.epoch == epoch)
                    s->arm_name(name);
            };
            self->zk->get_children(
                path,
                [self, name, epoch, path, on_change](int rc, std::vector<std::string> children) {
                    auto it = self->names.find(name);
                    if (it == self->names.end() || it->second.epoch != epoch)
                        return;
                    auto& nw = it->second;
                    bool first = nw.last.empty() && !nw.armed;
                    (void)first;
                    if (rc == ZNONODE) {
                        // No lock path yet (or reaped): watch for its creation instead.
                        bool had = !nw.last.empty();
                        nw.last.clear();
                        self->zk->exists(
                            path, [](int, node_stat) {}, on_change);
                        self->ready_name(name);
                        if (had)
                            self->tell_name(name, watch_event::released);
                        return;
                    }
                    if (rc != ZOK) {
                        nw.armed = false;
                        return self->tell_name(name, watch_event::resync);
                    }
                    auto now = recipe::contenders(std::move(children));
                    bool gone = std::any_of(nw.last.begin(), nw.last.end(), [&](const std::string& c) {
                        return std::find(now.begin(), now.end(), c) == now.end();
                    });
                    nw.last = std::move(now);
                    self->ready_name(name);
                    if (gone)
                        self->tell_name(name, watch_event::released);
                },
                on_change);
        });
    }
    std::map<watch_id, bool> ready_sent;
    void ready_name(const std::string& name)
    {
        for (auto& [id, w] : watchers)
            if (w->name == name && w->token.empty() && !ready_sent[id]) {
                ready_sent[id] = true;
                notify(w, watch_event::ready);
            }
    }
};

// =====================================================================================

zookeeper_store::zookeeper_store(asio::any_io_executor ex, zookeeper::config cfg)
    : impl_(std::make_shared<impl>(ex, std::move(cfg)))
{
    impl_->owner = this;
}

zookeeper_store::~zookeeper_store()
{
    close();
    impl_->owner = nullptr;
}

asio::any_io_executor zookeeper_store::get_executor() const
{
    return impl_->ex;
}

store_traits zookeeper_store::traits() const noexcept
{
    store_traits t;
    t.direct_handoff = true;  // the node after the holder's is the next holder, at the delete
    t.inherent_queue = true;
    t.live = liveness::per_session;
    t.confirms_leases = true;
    t.min_ttl = milliseconds(1);
    return t;
}

std::string zookeeper_store::describe() const
{
    return "zookeeper " + zookeeper::to_url(impl_->cfg) + " (root " + impl_->cfg.root + ")";
}

std::string zookeeper_store::node_of(const std::string& name, const std::string& token) const
{
    auto it = impl_->nodes.find({name, token});
    return it == impl_->nodes.end() ? std::string() : it->second.node;
}

session_info zookeeper_store::session() const noexcept
{
    return impl_->session_id ? impl_->info() : session_info{};
}

store::watch_id zookeeper_store::watch_session(std::function<void(session_event, const session_info&)> cb)
{
    auto id = impl_->next_id++;
    impl_->session_watchers.emplace(id, std::move(cb));
    return id;
}

store::watch_id zookeeper_store::watch(const std::string& name, const std::string& token, watch_callback cb)
{
    auto& m = *impl_;
    auto id = m.next_id++;
    auto w = std::make_shared<impl::watcher>(impl::watcher{name, token, std::move(cb)});
    m.watchers.emplace(id, w);
    if (m.closed)
        return id;
    if (!token.empty()) {
        m.notify(w, watch_event::ready);  // the queued attempt's node anchors the wait
        return id;
    }
    auto it = m.names.find(name);
    if (it != m.names.end() && it->second.armed) {
        m.ready_sent[id] = true;
        m.notify(w, watch_event::ready);
    } else if (it == m.names.end()) {
        m.names[name];
        m.arm_name(name);
    }
    return id;
}

void zookeeper_store::unwatch(watch_id id)
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
    m.ready_sent.erase(id);
    if (!w->token.empty()) {
        if (auto q = m.queue.find({w->name, w->token}); q != m.queue.end() && !m.tokened(w->name, w->token))
            m.drop_queued(q->second, std::nullopt);
        return;
    }
    bool others = std::any_of(m.watchers.begin(), m.watchers.end(),
                              [&](auto& e) { return e.second->name == w->name && e.second->token.empty(); });
    if (!others)
        m.names.erase(w->name);  // its watch fires once more, into nothing
}

void zookeeper_store::close()
{
    auto& m = *impl_;
    if (m.closed)
        return;
    m.closed = true;
    m.resolver.cancel();
    m.ping_timer.cancel();
    m.deadline_timer.cancel();
    for (auto& [k, q] : std::map(m.queue))
        m.drop_queued(q, std::nullopt);
    m.names.clear();
    for (auto& [id, w] : m.watchers)
        w->alive = false;
    m.fail_session_waiters(error::closed);
    m.session_id = 0;
    m.life.end();
    m.drop_client();  // the session ends: every node of ours goes now
}

// ---- operations ----------------------------------------------------------------------

void zookeeper_store::do_connect(asio::any_completion_handler<connect_signature> h)
{
    auto hp = std::make_shared<asio::any_completion_handler<connect_signature>>(std::move(h));
    impl_->ensure_session([self = impl_, hp](error_code ec) { complete(self->ex, *hp, ec); });
}

void zookeeper_store::do_try_acquire(const lease_request& req, asio::any_completion_handler<acquire_signature> h)
{
    auto& m = *impl_;
    if (m.closed)
        return complete(m.ex, h, error_code(error::closed), acquire_result{});
    if (req.kind != lease_kind::mutex) {
        set_error_text("zookeeper: this store serves mutex leases only");
        return complete(m.ex, h, error_code(error::not_supported), acquire_result{});
    }
    std::string why;
    auto path = recipe::lock_path(m.cfg.root, req.name, why);
    if (path.empty()) {
        set_error_text("zookeeper: " + why);
        return complete(m.ex, h, error_code(error::invalid_name), acquire_result{});
    }
    if (auto long_path = too_long(path, req.token.size()); !long_path.empty()) {
        set_error_text(std::move(long_path));
        return complete(m.ex, h, error_code(error::invalid_name), acquire_result{});
    }
    m.acquire(req, std::move(h), false);
}

void zookeeper_store::do_renew(const lease_key& k, std::chrono::milliseconds,
                               asio::any_completion_handler<renew_signature> h)
{
    auto& m = *impl_;
    if (m.closed)
        return complete(m.ex, h, error_code(error::closed), renew_result{});
    auto it = m.nodes.find({k.name, k.token});
    auto node = !k.ref.empty() ? k.ref : it != m.nodes.end() ? it->second.node : std::string();
    if (node.empty() || !m.session_id || !m.zk)
        return complete(m.ex, h, error_code(), renew_result{});  // no session: nothing of ours exists
    auto sid = m.session_id;
    auto hp = std::make_shared<asio::any_completion_handler<renew_signature>>(std::move(h));
    m.zk->exists(node, [self = impl_, sid, name = k.name, hp](int rc, node_stat s) {
        if (rc != ZOK && rc != ZNONODE)
            return complete(self->ex, *hp, self->to_error(rc, "confirming a node"), renew_result{});
        renew_result res{rc == ZOK && s.ephemeral_owner == sid && self->session_id == sid, false};
        if (auto it = self->contended.find(name); it != self->contended.end()) {
            res.contended = res.owned;
            self->contended.erase(it);
        }
        complete(self->ex, *hp, error_code(), res);
    });
}

void zookeeper_store::do_release(const lease_key& k, asio::any_completion_handler<bool_signature> h)
{
    impl_->release(k, std::move(h));
}

void zookeeper_store::do_force_release(const std::string& name, asio::any_completion_handler<bool_signature> h)
{
    auto& m = *impl_;
    if (m.closed)
        return complete(m.ex, h, error_code(error::closed), false);
    if (auto long_path = too_long(m.path_of(name), 0); !long_path.empty()) {
        set_error_text(std::move(long_path));
        return complete(m.ex, h, error_code(error::invalid_name), false);
    }
    auto hp = std::make_shared<asio::any_completion_handler<bool_signature>>(std::move(h));
    m.ensure_session([self = impl_, name, hp](error_code ec) {
        if (ec)
            return complete(self->ex, *hp, ec, false);
        auto path = self->path_of(name);
        self->zk->get_children(path, [self, path, hp](int rc, std::vector<std::string> children) {
            if (rc == ZNONODE)
                return complete(self->ex, *hp, error_code(), false);
            if (rc != ZOK)
                return complete(self->ex, *hp, self->to_error(rc, "children of " + path), false);
            auto sorted = recipe::contenders(std::move(children));
            if (sorted.empty())
                return complete(self->ex, *hp, error_code(), false);
            self->zk->remove(path + "/" + sorted.front(), [self, hp](int rc) {
                if (rc != ZOK && rc != ZNONODE)
                    return complete(self->ex, *hp, self->to_error(rc, "delete"), false);
                complete(self->ex, *hp, error_code(), rc == ZOK);
            });
        });
    });
}

void zookeeper_store::do_status(const std::string& name, asio::any_completion_handler<status_signature> h)
{
    auto& m = *impl_;
    if (m.closed)
        return complete(m.ex, h, error_code(error::closed), lock_status{});
    if (auto long_path = too_long(m.path_of(name), 0); !long_path.empty()) {
        set_error_text(std::move(long_path));
        return complete(m.ex, h, error_code(error::invalid_name), lock_status{});
    }
    auto hp = std::make_shared<asio::any_completion_handler<status_signature>>(std::move(h));
    m.ensure_session([self = impl_, name, hp](error_code ec) {
        if (ec)
            return complete(self->ex, *hp, ec, lock_status{});
        auto path = self->path_of(name);
        self->zk->get_children(path, [self, path, hp](int rc, std::vector<std::string> children) {
            lock_status s;
            if (rc == ZNONODE)
                return complete(self->ex, *hp, error_code(), s);
            if (rc != ZOK)
                return complete(self->ex, *hp, self->to_error(rc, "children of " + path), s);
            auto sorted = recipe::contenders(std::move(children));
            if (sorted.empty())
                return complete(self->ex, *hp, error_code(), s);
            s.held = true;
            s.key = path + "/" + sorted.front();
            s.queued = sorted.size() - 1;
            // The holder's data (its token; Curator writes its address) and czxid, then the
            // others' czxids for the highest token issued.
            auto left = std::make_shared<std::size_t>(sorted.size());
            auto out = std::make_shared<lock_status>(std::move(s));
            for (std::size_t i = 0; i < sorted.size(); ++i)
                self->zk->get(path + "/" + sorted[i], [self, hp, left, out, i](int rc, std::string data, node_stat st) {
                    if (rc == ZOK) {
                        if (i == 0) {
                            out->holder = std::move(data);
                            out->fencing_token = static_cast<std::uint64_t>(st.czxid);
                            // A holder of this session has what the session has left; the
                            // servers tell no client how long another session has (-1).
                            if (st.ephemeral_owner != 0 && st.ephemeral_owner == self->session_id)
                                out->ttl = ms_until(self->deadline(), clock_type::now());
                        }
                        out->last_fencing_token =
                            std::max(out->last_fencing_token, static_cast<std::uint64_t>(st.czxid));
                    }
                    if (--*left == 0)
                        complete(self->ex, *hp, error_code(), std::move(*out));
                });
        });
    });
}

}  // namespace dlock
