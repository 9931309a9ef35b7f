// SPDX-License-Identifier: BSL-1.0
// The session that carries every node of the store: opened on demand (host names resolved
// by Asio, not by the C client's blocking call), dated by requests of our own, taken as
// lost at its local deadline or when the servers expire it.
#include "zookeeper/store_impl.hpp"

#include <boost/asio/post.hpp>

#include <zookeeper/zookeeper.h>

#include <cstdio>

namespace dlock {

namespace asio = boost::asio;
using boost::system::error_code;
using std::chrono::milliseconds;
using clock_type = std::chrono::steady_clock;
using zookeeper::detail::client;
using zookeeper::detail::node_stat;

namespace {

// The session timeouts the handshake can carry (a signed 32-bit count of milliseconds) and
// the least the C client can complete a handshake with (it allows a fraction of it).
constexpr milliseconds max_session_timeout{2'147'483'647};
constexpr milliseconds min_session_ask{100};

std::string hex(std::int64_t v)
{
    char buf[20];
    std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(v));
    return buf;
}

}  // namespace

void zookeeper_store::impl::heard()
{
    if (zk)
        life.heard(zk->confirmed());
}

clock_type::time_point zookeeper_store::impl::deadline()
{
    heard();
    return life.deadline();
}

session_info zookeeper_store::impl::info()
{
    heard();
    return life.info();
}

error_code zookeeper_store::impl::to_error(int rc, const std::string& what)
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

void zookeeper_store::impl::ensure_session(std::function<void(error_code)> cont)
{
    if (closed)
        return cont(error::closed);
    if (session_id)
        return cont({});
    if (gate.wait(std::move(cont)))
        open_session();
}

void zookeeper_store::impl::opening_ended(error_code ec)
{
    connect_timer.cancel();
    gate.opened(ec);
}

void zookeeper_store::impl::open_session()
{
    // The handshake carries the timeout as a 32-bit count of milliseconds: a longer one
    // cannot even be asked for (it wrapped, and the handshake never completed).
    if (cfg.session_timeout > max_session_timeout) {
        set_text("zookeeper: a session timeout of " + std::to_string(cfg.session_timeout.count()) +
                 " ms is more than ZooKeeper can negotiate (at most " + std::to_string(max_session_timeout.count()) +
                 " ms; the servers grant 2 to 20 ticks unless configured)");
        return opening_ended(error::invalid_lease);
    }
    connect_timer.expires_after(cfg.connect_timeout);
    connect_timer.async_wait([w = weak_from_this()](error_code ec) {
        auto s = w.lock();
        if (ec || !s || !s->gate.opening())
            return;
        s->set_text("zookeeper " + zookeeper::to_url(s->cfg) + ": no server completed a session handshake within " +
                    std::to_string(s->cfg.connect_timeout.count()) + " ms (servers down, no quorum, or not ZooKeeper)");
        s->drop_client();
        s->opening_ended(error::connect_failed);
    });
    auto left = std::make_shared<std::size_t>(cfg.servers.size());
    auto hosts = std::make_shared<std::vector<std::string>>(cfg.servers.size());
    auto failed = std::make_shared<std::string>();
    for (std::size_t i = 0; i < cfg.servers.size(); ++i) {
        const auto& srv = cfg.servers[i];
        resolver.async_resolve(srv.host, std::to_string(srv.port),
                               [self = shared_from_this(), i, left, hosts,
                                failed](error_code ec, asio::ip::tcp::resolver::results_type r) {
                                   if (!self->gate.opening() || self->closed)
                                       return;
                                   if (!ec && !r.empty()) {
                                       auto ep = r.begin()->endpoint();
                                       auto a = ep.address().to_string();
                                       (*hosts)[i] =
                                           (ep.address().is_v6() ? "[" + a + "]" : a) + ":" + std::to_string(ep.port());
                                   } else {
                                       *failed = self->cfg.servers[i].host + ": " + ec.message();
                                   }
                                   if (--*left == 0)
                                       self->resolved(std::move(*hosts), *failed);
                               });
    }
}

// Every server name resolved or failed: the client connects to those that resolved.
void zookeeper_store::impl::resolved(std::vector<std::string> hosts, const std::string& failed)
{
    std::string list;
    for (auto& h : hosts)
        if (!h.empty())
            list += (list.empty() ? "" : ",") + h;
    if (list.empty()) {
        set_text("zookeeper: no server name resolved (" + failed + ")");
        return opening_ended(error::resolve_failed);
    }
    start_client(list + cfg.chroot);
}

void zookeeper_store::impl::start_client(const std::string& hosts)
{
    std::string err;
    // Below the floor the C client gives up on the handshake before the servers can answer
    // (it waits a fraction of the timeout): the floor is asked for instead, and the servers'
    // grant then shows the timeout asked for is not to be had.
    zk = client::open(
        ex, hosts, std::max(cfg.session_timeout, min_session_ask),
        [w = weak_from_this()](int state) {
            if (auto s = w.lock())
                s->on_state(state);
        },
        err);
    if (!zk) {
        set_text("zookeeper: " + err);
        return opening_ended(error::invalid_request);
    }
}

// Closes the current client later (never inside its own callbacks' caller frames).
void zookeeper_store::impl::drop_client()
{
    if (!zk)
        return;
    auto old = std::move(zk);
    zk.reset();
    old->close();
    asio::post(ex, [old] {});
}

void zookeeper_store::impl::on_state(int state)
{
    if (closed || !zk)
        return;
    if (state == ZOO_CONNECTED_STATE)
        return on_connected();
    if (state == ZOO_CONNECTING_STATE || state == ZOO_ASSOCIATING_STATE) {
        if (session_id)
            if (auto ev = life.unconfirmed(clock_type::now()))
                watches.tell_session(*ev, info());
        return;
    }
    if (state == ZOO_EXPIRED_SESSION_STATE)
        return session_gone("zookeeper: the servers expired session 0x" + hex(session_id));
    if (state == ZOO_AUTH_FAILED_STATE) {
        set_text("zookeeper: authentication failed");
        if (gate.opening()) {
            drop_client();
            return opening_ended(error::auth_failed);
        }
        return session_gone("zookeeper: authentication failed");
    }
}

void zookeeper_store::impl::on_connected()
{
    auto id = zk->session_id();
    if (session_id && id == session_id) {
        if (auto ev = life.reconnected())
            watches.tell_session(*ev, info());
        return;
    }
    if (session_id || !gate.opening())
        return;
    timeout = zk->negotiated_timeout();
    if (timeout != cfg.session_timeout) {
        auto asked = std::max(cfg.session_timeout, min_session_ask);
        set_text("zookeeper: a session timeout of " + std::to_string(cfg.session_timeout.count()) +
                 " ms is outside the servers' bounds (asked for " + std::to_string(asked.count()) +
                 " ms, they granted " + std::to_string(timeout.count()) +
                 " ms; the bounds are 2 to 20 ticks unless configured)");
        drop_client();
        return opening_ended(error::invalid_lease);
    }
    confirm_session(id);
}

// The handshake's send time is the library's: the session is dated by a request of ours
// instead, answered after the session exists.
void zookeeper_store::impl::confirm_session(std::int64_t id)
{
    zk->exists("/", [w = weak_from_this(), id, c = zk](int rc, node_stat) {
        auto s = w.lock();
        if (!s || s->closed || s->zk != c || !s->gate.opening())
            return;
        if (rc != ZOK && rc != ZNONODE) {
            s->drop_client();
            return s->opening_ended(s->to_error(rc, "confirming a new session"));
        }
        s->session_id = id;
        auto every = std::max(milliseconds(20), s->timeout / 3);
        auto up = s->life.opened(static_cast<std::uint64_t>(id), s->zk->confirmed(), s->timeout, {every, every});
        s->arm_ping();
        s->arm_deadline();
        s->watches.tell_session(up, s->info());
        s->opening_ended({});
    });
}

// A request of ours every third of the timeout: its reply confirms the session (the C
// client's own pings are invisible to us).
void zookeeper_store::impl::arm_ping()
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
                s->watches.tell_session(*ev, s->info());
        });
        s->arm_ping();
    });
}

void zookeeper_store::impl::arm_deadline()
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

// The session ended or can no longer be trusted: every lock of it is lost at once, and the
// old session is closed so that its nodes go now if the servers still keep them.
void zookeeper_store::impl::session_gone(std::string why)
{
    if (!session_id)
        return;
    set_text(std::move(why));
    heard();
    auto old = life.end();
    session_id = 0;
    nodes.clear();
    leases.clear();
    for (auto& [key, epoch] : std::exchange(permit_waits, {}))
        watches.tell(key.first, key.second, watch_event::resync);  // count again in the next session
    ping_timer.cancel();
    deadline_timer.cancel();
    drop_client();
    watches.tell_session(session_event::lost, old);
    queue.end_all(true);
    for (auto& [name, nw] : names) {
        nw.epoch = ++name_epochs;   // the old watch fires into nothing
        nw.leader_watched.clear();  // gone with the old client: watched anew in the next session
        watches.name_down(name, watch_event::resync);
    }
}

}  // namespace dlock
