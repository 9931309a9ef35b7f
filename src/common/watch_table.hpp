// SPDX-License-Identifier: BSL-1.0
// The contract's watches as a store keeps them (store.hpp): session watchers, a token's
// watcher (told of its grant), a name's untokened watchers (told of each release once the
// store's watch of the name is live). Callbacks run on the store's executor, never inside
// the call that asked for them, never after unwatch(): the table posts each one and checks
// at the run that its watcher is still there. The store keeps only its own watch of a name.
// etcd and ZooKeeper watch each name; PostgreSQL's one LISTEN hears every name at once
// (tokens::with_name); memcached and MariaDB start nothing to watch a name (add_live()).
#pragma once

#include <dlock/store.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

namespace dlock::detail {

class watch_table {
public:
    using watch_id = store::watch_id;
    using session_callback = std::function<void(session_event, const session_info&)>;

    /// How a tokened watcher waits for its grant.
    enum class tokens : unsigned char {
        anchored,   ///< its queued entry anchors the wait: ready at once, told only its grant
        with_name,  ///< the queue lives by the store's watch: it waits for the name and hears its releases too
    };

    explicit watch_table(boost::asio::any_io_executor ex, tokens t = tokens::anchored) : ex_(std::move(ex)), tokens_(t)
    {
    }

    /// A session watcher; told synchronously by tell_session() (the store's own events).
    watch_id add_session(session_callback cb)
    {
        auto id = next_++;
        sessions_.emplace(id, std::move(cb));
        return id;
    }
    /// Tells every session watcher, in order; a callback may unwatch any of them.
    void tell_session(session_event ev, const session_info& i)
    {
        for (auto& [id, cb] : std::map(sessions_))
            if (sessions_.count(id))
                cb(ev, i);
    }

    struct added {
        watch_id id = 0;
        bool starts_name = false;  ///< the name's first untokened watcher: the store watches the name now
    };
    /// A watcher of `name` (with `token`: of that token's grant, ready at once, as the
    /// queued attempt's own entry anchors the wait). After close(): never told anything.
    added add(const std::string& name, const std::string& token, store::watch_callback cb)
    {
        auto id = next_++;
        auto w = std::make_shared<watcher>(watcher{name, token, std::move(cb)});
        watchers_.emplace(id, w);
        if (closed_)
            return {id, false};
        if (!hears_name(*w)) {
            post(w, watch_event::ready);
            return {id, false};
        }
        bool first = token.empty() && untokened_of(name, id) == 0;
        if (live_names_.count(name))
            post(w, watch_event::ready);
        return {id, first};
    }
    /// An untokened watcher of a name the store watches at once, without starting anything
    /// (memcached: no notifications at all; MariaDB: a named lock is state): ready posted.
    added add_live(const std::string& name, store::watch_callback cb)
    {
        auto a = add(name, {}, std::move(cb));
        if (a.starts_name)
            name_ready(name);
        return a;
    }

    struct removed {
        enum class what : unsigned char {
            none,
            session,
            tokened,
            untokened
        } kind = what::none;
        std::string name, token;
        bool last = false;  ///< no watcher of the same name (untokened) or (name, token) is left
    };
    /// Stops `id`'s callbacks at once (a post already made runs into nothing).
    removed remove(watch_id id)
    {
        if (sessions_.erase(id))
            return {removed::what::session, {}, {}, false};
        auto it = watchers_.find(id);
        if (it == watchers_.end())
            return {};
        auto w = it->second;
        w->alive = false;
        watchers_.erase(it);
        removed r{w->token.empty() ? removed::what::untokened : removed::what::tokened, w->name, w->token, false};
        r.last = w->token.empty() ? untokened_of(w->name, 0) == 0 : !watched(w->name, w->token);
        if (std::none_of(watchers_.begin(), watchers_.end(),
                         [&](auto& e) { return e.second->name == w->name && hears_name(*e.second); }))
            live_names_.erase(w->name);
        return r;
    }

    /// A watcher of `token`'s grant on `name` is there.
    bool watched(const std::string& name, const std::string& token) const
    {
        return std::any_of(watchers_.begin(), watchers_.end(),
                           [&](auto& e) { return e.second->name == name && e.second->token == token; });
    }
    /// Tells `token`'s watcher on `name` (the oldest told `ready`, if several); false if
    /// none listens (with_name: one not yet ready cannot have queued its token).
    bool tell(const std::string& name, const std::string& token, watch_event ev, grant_notice g = {})
    {
        for (auto& [id, w] : watchers_)
            if (w->name == name && w->token == token && w->told_ready) {
                post(w, ev, std::move(g));
                return true;
            }
        return false;
    }
    /// Tells the tokened watchers of `name` but `except`'s (a release of ours: a store
    /// whose watch of the name does not see its own deletes first).
    void tell_tokens(const std::string& name, const std::string& except, watch_event ev)
    {
        for (auto& [id, w] : watchers_)
            if (w->name == name && !w->token.empty() && w->token != except)
                post(w, ev);
    }

    /// The store's watch of `name` is live: its watchers not yet told hear `ready`.
    void name_ready(const std::string& name)
    {
        if (closed_ || !live_names_.insert(name).second)
            return;
        for (auto& [id, w] : watchers_)
            if (w->name == name && hears_name(*w) && !w->told_ready) {
                w->told_ready = true;
                post(w, watch_event::ready);
            }
    }
    /// The store's watch of `name` is down until name_ready() again; with `ev` (resync:
    /// releases may be missed meanwhile) its watchers that were told `ready` hear it.
    void name_down(const std::string& name, std::optional<watch_event> ev = std::nullopt)
    {
        live_names_.erase(name);
        if (ev)
            tell_name(name, *ev);
    }
    /// Tells `name`'s watchers (untokened; with_name: all) that were told `ready`.
    void tell_name(const std::string& name, watch_event ev)
    {
        for (auto& [id, w] : watchers_)
            if (w->name == name && hears_name(*w) && w->told_ready)
                post(w, ev);
    }
    bool name_live(const std::string& name) const { return live_names_.count(name) != 0; }
    /// The names watched, with or without a token (a store whose one watch hears them all).
    std::set<std::string> names() const
    {
        std::set<std::string> out;
        for (auto& [id, w] : watchers_)
            out.insert(w->name);
        return out;
    }
    /// The store closed: no watcher hears anything more (the watchers stay until unwatched).
    void close()
    {
        closed_ = true;
        live_names_.clear();
        for (auto& [id, w] : watchers_)
            w->alive = false;
    }

private:
    struct watcher {
        std::string name, token;
        store::watch_callback cb;
        bool alive = true;
        bool told_ready = false;  // untokened: `ready` was posted
    };
    // The watcher waits for the store's watch of its name and hears its releases.
    bool hears_name(const watcher& w) const { return w.token.empty() || tokens_ == tokens::with_name; }
    void post(const std::shared_ptr<watcher>& w, watch_event ev, grant_notice g = {})
    {
        if (ev == watch_event::ready)
            w->told_ready = true;
        boost::asio::post(ex_, [w, ev, g = std::move(g)] {
            if (w->alive)
                w->cb(ev, g);
        });
    }
    // Untokened watchers of `name` other than `skip`.
    std::size_t untokened_of(const std::string& name, watch_id skip) const
    {
        return std::count_if(watchers_.begin(), watchers_.end(), [&](auto& e) {
            return e.first != skip && e.second->name == name && e.second->token.empty();
        });
    }

    boost::asio::any_io_executor ex_;
    tokens tokens_;
    std::map<watch_id, session_callback> sessions_;
    std::map<watch_id, std::shared_ptr<watcher>> watchers_;
    std::set<std::string> live_names_;  // names whose watch by the store is live
    watch_id next_ = 1;
    bool closed_ = false;
};

}  // namespace dlock::detail
