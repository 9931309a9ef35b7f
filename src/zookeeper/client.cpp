// SPDX-License-Identifier: BSL-1.0
#include "zookeeper/client.hpp"

#include <boost/asio/post.hpp>

#include <zookeeper/zookeeper.h>

#include <cstdlib>
#include <cstring>
#include <iostream>

namespace dlock::zookeeper::detail {

namespace asio = boost::asio;
using boost::system::error_code;

// What the C library hands a completion or a watcher, turned into a closure for the queue.
struct client::call {
    client* owner = nullptr;
    std::uint64_t id = 0;
    bool is_watch = false;
    clock::time_point sent{};
    std::uint64_t watch_id = 0;    // a request that sets a watch: the watch's call
    bool watch_on_nonode = false;  // exists(): a missing node is watched for its creation
    std::function<std::function<void()>(int rc, const char* s, int len, const Stat* st, const String_vector* v)> raw;
};

namespace {

// The C library logs to stderr; its messages are kept quiet unless DLOCK_ZK_LOG is set.
void log_line(const char* message)
{
    static const bool on = std::getenv("DLOCK_ZK_LOG") != nullptr;
    if (on)
        std::cerr << message << '\n';
}

node_stat to_stat(const Stat* st)
{
    return st ? node_stat{st->czxid, st->ephemeralOwner, st->numChildren, st->mtime, st->version} : node_stat{};
}

// A reply from the servers (not one the client made up when the connection or session went).
bool answered(int rc)
{
    return rc != ZCONNECTIONLOSS && rc != ZOPERATIONTIMEOUT && rc != ZCLOSING && rc != ZSESSIONEXPIRED &&
           rc != ZINVALIDSTATE && rc != ZSYSTEMERROR && rc != ZMARSHALLINGERROR;
}

}  // namespace

struct client_access {
    static void complete(const void* data, int rc, const char* s, int len, const Stat* st, const String_vector* v)
    {
        auto* c = static_cast<client::call*>(const_cast<void*>(data));
        auto* self = c->owner;
        auto it = self->calls_.find(c->id);
        if (it == self->calls_.end())
            return;
        auto owned = std::move(it->second);
        self->calls_.erase(it);
        if (answered(rc) && owned->sent > self->confirmed_)
            self->confirmed_ = owned->sent;
        // A watch the request could not set never fires: forget it now.
        if (owned->watch_id) {
            bool set = rc == ZOK || (rc == ZNONODE && owned->watch_on_nonode);
            if (!set)
                self->calls_.erase(owned->watch_id);
        }
        self->ready_.push_back(owned->raw(rc, s, len, st, v));
    }
    static void string_stat(int rc, const char* s, const Stat* st, const void* data)
    {
        complete(data, rc, s, s ? static_cast<int>(std::strlen(s)) : 0, st, nullptr);
    }
    static void strings_stat(int rc, const String_vector* v, const Stat* st, const void* data)
    {
        complete(data, rc, nullptr, 0, st, v);
    }
    static void stat(int rc, const Stat* st, const void* data) { complete(data, rc, nullptr, 0, st, nullptr); }
    static void string_done(int rc, const char*, const void* data) { complete(data, rc, nullptr, 0, nullptr, nullptr); }
    static void data(int rc, const char* value, int len, const Stat* st, const void* d)
    {
        complete(d, rc, value, len, st, nullptr);
    }
    static void void_done(int rc, const void* data) { complete(data, rc, nullptr, 0, nullptr, nullptr); }
    static void watcher(zhandle_t*, int type, int, const char*, void* ctx)
    {
        auto* c = static_cast<client::call*>(ctx);
        if (type == ZOO_SESSION_EVENT)
            return;  // the session's own watcher speaks for those
        auto* self = c->owner;
        auto it = self->calls_.find(c->id);
        if (it == self->calls_.end())
            return;
        auto owned = std::move(it->second);
        self->calls_.erase(it);
        self->ready_.push_back(owned->raw(type, nullptr, 0, nullptr, nullptr));
    }
    static void session(zhandle_t* zh, int type, int state, const char*, void*)
    {
        if (type != ZOO_SESSION_EVENT)
            return;
        auto* self = static_cast<client*>(const_cast<void*>(zoo_get_context(zh)));
        if (!self)
            return;
        self->ready_.push_back([w = std::weak_ptr<client>(self->weak_from_this()), state] {
            if (auto s = w.lock(); s && s->on_state_)
                s->on_state_(state);
        });
    }
};

client::client(asio::any_io_executor ex) : ex_(ex), sd_(ex), timer_(ex) {}

std::shared_ptr<client> client::open(asio::any_io_executor ex, const std::string& hosts,
                                     std::chrono::milliseconds session_timeout, state_fn on_state, std::string& err)
{
    static const bool quiet = [] {
        zoo_set_debug_level(std::getenv("DLOCK_ZK_LOG") ? ZOO_LOG_LEVEL_INFO : ZOO_LOG_LEVEL_ERROR);
        return true;
    }();
    (void)quiet;
    std::shared_ptr<client> c(new client(ex));
    c->on_state_ = std::move(on_state);
    c->zh_ = zookeeper_init2(hosts.c_str(), &client_access::session, static_cast<int>(session_timeout.count()), nullptr,
                             c.get(), 0, &log_line);
    if (!c->zh_) {
        err = std::string("the ZooKeeper client refused '") + hosts + "': " + std::strerror(errno);
        return nullptr;
    }
    c->kick();
    return c;
}

client::~client()
{
    close();
}

void client::close()
{
    if (!zh_)
        return;
    ++gen_;
    timer_.cancel();
    if (sd_.is_open())
        sd_.release();
    auto* zh = zh_;
    zh_ = nullptr;
    zoo_set_context(zh, nullptr);
    zookeeper_close(zh);  // completes what is pending with ZCLOSING (into ready_)
    // Whatever the library did not call back (watches, mostly) ends here.
    for (auto& [id, c] : calls_)
        if (!c->is_watch)
            ready_.push_back(c->raw(ZCLOSING, nullptr, 0, nullptr, nullptr));
    calls_.clear();
    if (!draining_)
        asio::post(ex_, [w = weak_from_this()] {
            if (auto s = w.lock())
                s->drain();
        });
}

int client::state() const
{
    return zh_ ? zoo_state(zh_) : 0;
}

std::int64_t client::session_id() const
{
    if (!zh_)
        return 0;
    const clientid_t* id = zoo_client_id(zh_);
    return id ? id->client_id : 0;
}

std::chrono::milliseconds client::negotiated_timeout() const
{
    return std::chrono::milliseconds(zh_ ? zoo_recv_timeout(zh_) : 0);
}

client::call* client::add_call(bool is_watch)
{
    auto c = std::make_unique<call>();
    c->owner = this;
    c->id = next_call_++;
    c->is_watch = is_watch;
    c->sent = clock::now();
    auto* p = c.get();
    calls_.emplace(p->id, std::move(c));
    return p;
}

// A request the library refused at once (ZINVALIDSTATE after an expiry, ZBADARGUMENTS):
// its completion runs from the queue like any other.
void client::started(int rc, std::uint64_t id)
{
    if (rc == ZOK) {
        kick();
        return;
    }
    auto it = calls_.find(id);
    if (it == calls_.end())
        return;
    auto owned = std::move(it->second);
    calls_.erase(it);
    if (owned->watch_id)
        calls_.erase(owned->watch_id);
    ready_.push_back(owned->raw(rc, nullptr, 0, nullptr, nullptr));
    kick();
}

namespace {

client::call* watch_call(client::call* c, client::watch_fn fn)
{
    c->raw = [fn = std::move(fn)](int type, const char*, int, const Stat*,
                                  const String_vector*) -> std::function<void()> { return [fn, type] { fn(type); }; };
    return c;
}

}  // namespace

void client::create(const std::string& path, const std::string& data, int flags,
                    std::function<void(int, std::string, node_stat)> cb, std::int64_t ttl)
{
    auto* c = add_call(false);
    c->raw = [cb = std::move(cb)](int rc, const char* s, int len, const Stat* st,
                                  const String_vector*) -> std::function<void()> {
        return [cb, rc, p = std::string(s ? s : "", s ? static_cast<std::size_t>(len) : 0), stat = to_stat(st)] {
            cb(rc, p, stat);
        };
    };
    auto id = c->id;
    int rc = !zh_      ? ZCLOSING
             : ttl > 0 ? zoo_acreate2_ttl(zh_, path.c_str(), data.data(), static_cast<int>(data.size()),
                                          &ZOO_OPEN_ACL_UNSAFE, flags, ttl, &client_access::string_stat, c)
                       : zoo_acreate2(zh_, path.c_str(), data.data(), static_cast<int>(data.size()),
                                      &ZOO_OPEN_ACL_UNSAFE, flags, &client_access::string_stat, c);
    started(rc, id);
}

void client::get_children(const std::string& path, std::function<void(int, std::vector<std::string>)> cb,
                          watch_fn watch)
{
    call* w = watch ? watch_call(add_call(true), std::move(watch)) : nullptr;
    auto* c = add_call(false);
    c->watch_id = w ? w->id : 0;
    c->raw = [cb = std::move(cb)](int rc, const char*, int, const Stat*,
                                  const String_vector* v) -> std::function<void()> {
        std::vector<std::string> names;
        if (rc == ZOK && v)
            for (int i = 0; i < v->count; ++i)
                names.emplace_back(v->data[i]);
        return [cb, rc, names = std::move(names)] { cb(rc, names); };
    };
    auto id = c->id;
    int rc = !zh_ ? ZCLOSING
             : w  ? zoo_awget_children2(zh_, path.c_str(), &client_access::watcher, w, &client_access::strings_stat, c)
                  : zoo_aget_children2(zh_, path.c_str(), 0, &client_access::strings_stat, c);
    started(rc, id);
}

void client::exists(const std::string& path, std::function<void(int, node_stat)> cb, watch_fn watch)
{
    call* w = watch ? watch_call(add_call(true), std::move(watch)) : nullptr;
    auto* c = add_call(false);
    c->watch_id = w ? w->id : 0;
    c->watch_on_nonode = true;
    c->raw = [cb = std::move(cb)](int rc, const char*, int, const Stat* st,
                                  const String_vector*) -> std::function<void()> {
        return [cb, rc, stat = to_stat(st)] { cb(rc, stat); };
    };
    auto id = c->id;
    int rc = !zh_ ? ZCLOSING
             : w  ? zoo_awexists(zh_, path.c_str(), &client_access::watcher, w, &client_access::stat, c)
                  : zoo_aexists(zh_, path.c_str(), 0, &client_access::stat, c);
    started(rc, id);
}

void client::get(const std::string& path, std::function<void(int, std::string, node_stat)> cb, watch_fn watch)
{
    call* w = watch ? watch_call(add_call(true), std::move(watch)) : nullptr;
    auto* c = add_call(false);
    c->watch_id = w ? w->id : 0;
    c->raw = [cb = std::move(cb)](int rc, const char* s, int len, const Stat* st,
                                  const String_vector*) -> std::function<void()> {
        return [cb, rc, d = std::string(s && len > 0 ? s : "", s && len > 0 ? static_cast<std::size_t>(len) : 0),
                stat = to_stat(st)] { cb(rc, d, stat); };
    };
    auto id = c->id;
    int rc = !zh_ ? ZCLOSING
             : w  ? zoo_awget(zh_, path.c_str(), &client_access::watcher, w, &client_access::data, c)
                  : zoo_aget(zh_, path.c_str(), 0, &client_access::data, c);
    started(rc, id);
}

void client::remove(const std::string& path, std::function<void(int)> cb, int version)
{
    auto* c = add_call(false);
    c->raw = [cb = std::move(cb)](int rc, const char*, int, const Stat*,
                                  const String_vector*) -> std::function<void()> { return [cb, rc] { cb(rc); }; };
    auto id = c->id;
    int rc = zh_ ? zoo_adelete(zh_, path.c_str(), version, &client_access::void_done, c) : ZCLOSING;
    started(rc, id);
}

void client::set(const std::string& path, const std::string& data, std::function<void(int)> cb)
{
    auto* c = add_call(false);
    c->raw = [cb = std::move(cb)](int rc, const char*, int, const Stat*,
                                  const String_vector*) -> std::function<void()> { return [cb, rc] { cb(rc); }; };
    auto id = c->id;
    int rc = zh_ ? zoo_aset(zh_, path.c_str(), data.data(), static_cast<int>(data.size()), -1, &client_access::stat, c)
                 : ZCLOSING;
    started(rc, id);
}

void client::set(const std::string& path, const std::string& data, int version, std::function<void(int, node_stat)> cb)
{
    auto* c = add_call(false);
    c->raw = [cb = std::move(cb)](int rc, const char*, int, const Stat* st,
                                  const String_vector*) -> std::function<void()> {
        return [cb, rc, stat = to_stat(st)] { cb(rc, stat); };
    };
    auto id = c->id;
    int rc =
        zh_ ? zoo_aset(zh_, path.c_str(), data.data(), static_cast<int>(data.size()), version, &client_access::stat, c)
            : ZCLOSING;
    started(rc, id);
}

void client::sync(const std::string& path, std::function<void(int)> cb)
{
    auto* c = add_call(false);
    c->raw = [cb = std::move(cb)](int rc, const char*, int, const Stat*,
                                  const String_vector*) -> std::function<void()> { return [cb, rc] { cb(rc); }; };
    auto id = c->id;
    int rc = zh_ ? zoo_async(zh_, path.c_str(), &client_access::string_done, c) : ZCLOSING;
    started(rc, id);
}

// ---- the loop ------------------------------------------------------------------------

void client::kick()
{
    if (kicked_)
        return;
    kicked_ = true;
    asio::post(ex_, [w = weak_from_this()] {
        if (auto s = w.lock()) {
            s->kicked_ = false;
            s->drain();
            s->pump();
        }
    });
}

void client::drain()
{
    if (draining_)
        return;
    draining_ = true;
    while (!ready_.empty()) {
        auto f = std::move(ready_.front());
        ready_.pop_front();
        f();
    }
    draining_ = false;
}

// Asks the library what it waits for, and waits for that. The descriptor is assigned for
// one wait and released after it: the library closes and reopens its socket on reconnects
// (possibly under the same number), which Asio must not keep registered.
void client::pump()
{
    if (!zh_)
        return;
    ++gen_;
    timer_.cancel();
    if (sd_.is_open())
        sd_.release();
    int fd = -1, interest = 0;
    timeval tv{};
    int rc = zookeeper_interest(zh_, &fd, &interest, &tv);
    auto self = shared_from_this();
    drain();
    if (!zh_)
        return;
    if (rc == ZINVALIDSTATE)
        return;  // expired or refused: the session watcher has said so
    auto gen = gen_;
    timer_.expires_after(std::chrono::seconds(tv.tv_sec) + std::chrono::microseconds(tv.tv_usec));
    timer_.async_wait([w = weak_from_this(), gen](error_code ec) {
        if (auto s = w.lock(); s && !ec)
            s->on_ready(gen, 0);
    });
    if (fd < 0 || !(interest & (ZOOKEEPER_READ | ZOOKEEPER_WRITE)))
        return;
    error_code ec;
    sd_.assign(fd, ec);
    if (ec)
        return;  // the timer brings the next round
    if (interest & ZOOKEEPER_READ)
        sd_.async_wait(asio::posix::descriptor_base::wait_read, [w = weak_from_this(), gen](error_code ec) {
            if (auto s = w.lock(); s && !ec)
                s->on_ready(gen, ZOOKEEPER_READ);
        });
    if (interest & ZOOKEEPER_WRITE)
        sd_.async_wait(asio::posix::descriptor_base::wait_write, [w = weak_from_this(), gen](error_code ec) {
            if (auto s = w.lock(); s && !ec)
                s->on_ready(gen, ZOOKEEPER_WRITE);
        });
}

void client::on_ready(std::uint64_t gen, int events)
{
    if (gen != gen_ || !zh_)
        return;
    ++gen_;  // the other waits of this round are void
    timer_.cancel();
    if (sd_.is_open())
        sd_.release();
    auto self = shared_from_this();
    zookeeper_process(zh_, events);
    drain();
    pump();
}

}  // namespace dlock::zookeeper::detail
