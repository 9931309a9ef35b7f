// SPDX-License-Identifier: BSL-1.0
// Count-down latches (latch_node.hpp's layout): a count-down reads the servers' time (a
// write to the store's clock node), the latch node and what else the name holds, pipelined
// in one round trip, then writes the latch back conditionally on the version it read (or
// creates it); a lost race reads again. Waiters watch the latch node's data through the
// name's watch (name_watch.cpp): every count-down is a change they hear.
#include "common/lease_checks.hpp"
#include "core/kind_text.hpp"
#include "zookeeper/latch_node.hpp"
#include "zookeeper/semaphore_layout.hpp"
#include "zookeeper/store_impl.hpp"

#include <zookeeper/zookeeper.h>

namespace dlock {

using boost::system::error_code;
using zookeeper::detail::node_stat;
namespace recipe = zookeeper::recipe;
namespace layout = zookeeper::semaphore_layout;

namespace {

// Tries of one count-down against concurrent ones before it gives up (server_busy).
constexpr int max_latch_rounds = 32;

// What a latch is told when the name is another kind's (a semaphore's number is not read).
std::string in_use_text(lease_kind k)
{
    return k == lease_kind::permit ? "dlock: the name is in use as a semaphore" : dlock::detail::kind_in_use_text(k);
}

}  // namespace

// One round's replies: the clock write, the latch node, the name's children and a
// semaphore's `locks` and `leases` under it.
struct zookeeper_store::impl::latch_replies {
    int pending = 0;
    int clock_rc = 1, latch_rc = 1, children_rc = 1, locks_rc = 1, leases_rc = 1;
    std::int64_t now = 0;
    std::string data;
    node_stat stat;
    std::vector<std::string> children, locks, leases;
};

// What a name holds besides a latch: a contender's kind, or a semaphore with nodes.
std::optional<lease_kind> zookeeper_store::impl::other_kind(const std::vector<std::string>& children,
                                                            const std::vector<std::string>& locks,
                                                            const std::vector<std::string>& leases)
{
    auto sorted = recipe::contenders(children);
    if (!sorted.empty())
        return zookeeper::detail::lease_kind_of(recipe::parse_contender(sorted.front())->kind);
    if (!locks.empty() || !leases.empty())
        return lease_kind::permit;
    return std::nullopt;
}

std::string zookeeper_store::impl::clock_path() const
{
    std::string why;
    return recipe::lock_path(cfg.root, "dlock-clock", why);  // as a name's path: a root of "/" too
}

std::string zookeeper_store::impl::latch_path(const std::string& name) const
{
    return path_of(name) + "/" + std::string(zookeeper::latch_node::name);
}

void zookeeper_store::impl::count_down(std::shared_ptr<latch_op> op)
{
    if (++op->rounds > max_latch_rounds) {
        set_text("zookeeper: the latch " + op->name + " changed under " + std::to_string(max_latch_rounds) +
                 " count-downs in a row");
        return latch_done(op, error::server_busy, 0);
    }
    ensure_session([self = shared_from_this(), op](error_code ec) {
        if (ec)
            return self->latch_done(op, ec, 0);
        auto st = std::make_shared<impl::latch_replies>();
        st->pending = 5;
        auto next = [self, op, st] {
            if (--st->pending == 0)
                self->judge_count_down(op, *st);
        };
        auto base = self->path_of(op->name);
        // The clock first: every read behind it on this session is at least as new.
        self->zk->set(self->clock_path(), "", -1, [st, next](int rc, node_stat s) {
            st->clock_rc = rc;
            st->now = s.mtime;
            next();
        });
        self->zk->get(self->latch_path(op->name), [st, next](int rc, std::string data, node_stat s) {
            st->latch_rc = rc;
            st->data = std::move(data);
            st->stat = s;
            next();
        });
        auto children = [st, next](int& rc_out, std::vector<std::string>& out) {
            return [&rc_out, &out, st, next](int rc, std::vector<std::string> c) {
                rc_out = rc == ZNONODE ? ZOK : rc;
                out = std::move(c);
                next();
            };
        };
        self->zk->get_children(base, children(st->children_rc, st->children));
        self->zk->get_children(base + "/" + std::string(layout::locks), children(st->locks_rc, st->locks));
        self->zk->get_children(base + "/" + std::string(layout::leases), children(st->leases_rc, st->leases));
    });
}

void zookeeper_store::impl::judge_count_down(std::shared_ptr<latch_op> op, latch_replies& st)
{
    namespace ln = zookeeper::latch_node;
    if (closed || !zk)  // closed, or the session went between two steps
        return latch_done(op, closed ? error::closed : error::connection_lost, 0);
    if (st.clock_rc == ZNONODE)  // the first latch under this root: make the clock node
        return make_clock([self = shared_from_this(), op](int rc) {
            if (rc != ZOK && rc != ZNODEEXISTS)
                return self->latch_done(op, self->to_error(rc, "create " + self->clock_path()), 0);
            self->count_down(op);
        });
    for (auto [rc, what] : {std::pair{st.clock_rc, clock_path()}, std::pair{st.children_rc, path_of(op->name)},
                            std::pair{st.locks_rc, path_of(op->name)}, std::pair{st.leases_rc, path_of(op->name)}})
        if (rc != ZOK)
            return latch_done(op, to_error(rc, "read " + what), 0);
    if (st.latch_rc != ZOK && st.latch_rc != ZNONODE)
        return latch_done(op, to_error(st.latch_rc, "read " + latch_path(op->name)), 0);
    note_server_time(st.now);
    // Another kind on the name refuses every count-down (a latch made in a race with it too).
    if (auto k = other_kind(st.children, st.locks, st.leases)) {
        set_text(in_use_text(*k));
        return latch_done(op, error::kind_mismatch, 0);
    }
    std::optional<ln::content> current;
    if (st.latch_rc == ZOK) {
        current = ln::decode(st.data);
        if (!current) {
            set_text("zookeeper: " + latch_path(op->name) + " is not a dlock latch's node");
            return latch_done(op, error::kind_mismatch, 0);
        }
        // Expired: deleted (if unchanged since read), then made afresh, as a TTL node with
        // this count-down's ttl (a TTL node's own cannot change).
        if (ln::expired(*current, st.stat.mtime, st.now))
            return remove_expired(op, st.stat.version);
    }
    auto step = ln::count_down(current, op->member, op->count, op->ttl.count());
    if (step.mismatch) {
        set_text("zookeeper: the latch " + op->name + " exists with a count of " + std::to_string(step.have) +
                 ", not " + std::to_string(op->count));
        return latch_done(op, error::count_mismatch, 0);
    }
    if (step.too_big) {
        set_text("zookeeper: the latch " + op->name + "'s members would not fit in one node (" +
                 std::to_string(ln::max_data) + " bytes)");
        return latch_done(op, error::invalid_option, 0);
    }
    auto data = ln::encode(step.next);
    if (st.latch_rc == ZOK)
        return zk->set(latch_path(op->name), data, st.stat.version,
                       [self = shared_from_this(), op, remaining = step.remaining](int rc, node_stat s) {
                           if (rc == ZBADVERSION || rc == ZNONODE)
                               return self->count_down(op);  // another count-down came first: read again
                           if (rc != ZOK)
                               return self->latch_done(op, self->to_error(rc, "set " + self->latch_path(op->name)), 0);
                           self->note_server_time(s.mtime);
                           self->latch_done(op, error_code(), remaining);
                       });
    create_latch(op, data, step.remaining);
}

// An expired latch read at `version`: deleted (unless it changed), then the count-down again.
void zookeeper_store::impl::remove_expired(std::shared_ptr<latch_op> op, int version)
{
    zk->remove(
        latch_path(op->name),
        [self = shared_from_this(), op](int rc) {
            if (rc != ZOK && rc != ZNONODE && rc != ZBADVERSION)  // a refusal, not a race
                return self->latch_done(op, self->to_error(rc, "delete " + self->latch_path(op->name)), 0);
            self->count_down(op);
        },
        version);
}

// A new latch node: a TTL node where the servers allow them, so an abandoned one goes too.
void zookeeper_store::impl::create_latch(std::shared_ptr<latch_op> op, const std::string& data, std::uint64_t remaining)
{
    if (closed || !zk)
        return latch_done(op, closed ? error::closed : error::connection_lost, 0);
    auto path = latch_path(op->name);
    const bool ttl = ttl_nodes;
    auto created = [self = shared_from_this(), op, data, remaining, ttl, path](int rc, std::string, node_stat) {
        if (ttl && (rc == ZUNIMPLEMENTED || rc == ZBADARGUMENTS)) {
            self->ttl_nodes = false;  // extendedTypesEnabled is off: a plain node
            return self->create_latch(op, data, remaining);
        }
        if (rc == ZNODEEXISTS)
            return self->count_down(op);
        if (rc == ZNONODE && !op->parents_made) {
            op->parents_made = true;
            return self->make_parents(self->path_of(op->name), [self, op](int rc) {
                if (rc != ZOK && rc != ZNODEEXISTS)
                    return self->latch_done(op, self->to_error(rc, "create " + self->path_of(op->name)), 0);
                self->count_down(op);
            });
        }
        if (rc != ZOK)
            return self->latch_done(op, self->to_error(rc, "create " + path), 0);
        self->check_new_latch(op, remaining);
    };
    zk->create(path, data, ttl ? ZOO_PERSISTENT_WITH_TTL : 0, created, ttl ? op->ttl.count() : 0);
}

// A latch just made on a name that another kind may have taken meanwhile: both looked
// after their own write, so at least one sees the other; the latch backs off if it does.
void zookeeper_store::impl::check_new_latch(std::shared_ptr<latch_op> op, std::uint64_t remaining)
{
    if (closed || !zk)
        return latch_done(op, closed ? error::closed : error::connection_lost, 0);
    auto base = path_of(op->name);
    auto st = std::make_shared<impl::latch_replies>();
    st->pending = 3;
    auto next = [self = shared_from_this(), op, st, remaining] {
        if (--st->pending > 0)
            return;
        for (int rc : {st->children_rc, st->locks_rc, st->leases_rc})
            if (rc != ZOK)  // counted, but what else the name holds is unknown: the caller retries
                return self->latch_done(op, self->to_error(rc, "children of " + self->path_of(op->name)), 0);
        auto k = self->other_kind(st->children, st->locks, st->leases);
        if (!k)
            return self->latch_done(op, error_code(), remaining);
        self->set_text(in_use_text(*k));
        if (self->zk)
            self->zk->remove(
                self->latch_path(op->name), [](int) {}, 0);  // only as we made it
        self->latch_done(op, error::kind_mismatch, 0);
    };
    auto children = [next](int& rc_out, std::vector<std::string>& out) {
        return [&rc_out, &out, next](int rc, std::vector<std::string> c) {
            rc_out = rc == ZNONODE ? ZOK : rc;
            out = std::move(c);
            next();
        };
    };
    zk->get_children(base, children(st->children_rc, st->children));
    zk->get_children(base + "/" + std::string(layout::locks), children(st->locks_rc, st->locks));
    zk->get_children(base + "/" + std::string(layout::leases), children(st->leases_rc, st->leases));
}

// The clock node and the root above it, all persistent.
void zookeeper_store::impl::make_clock(std::function<void(int)> done)
{
    make_parents(clock_path(), std::move(done), 0);
}

void zookeeper_store::impl::latch_done(const std::shared_ptr<latch_op>& op, error_code ec, std::uint64_t remaining)
{
    dlock::detail::post_completion(ex, op->h.take(), ec, ec ? std::uint64_t{0} : remaining);
}

// The servers' time, from the mtime of a write of ours, and when it was heard: a read
// without a write of its own estimates the servers' time from it (node_stat::mtime).
void zookeeper_store::impl::note_server_time(std::int64_t mtime)
{
    if (mtime > 0)
        server_time = {mtime, clock_type::now()};
}

// A latch's state: the latch node, with the servers' time from a recent write of ours
// (a clock write first when none is recent). An expired latch is deleted on the way.
void zookeeper_store::impl::read_latch(const std::string& name,
                                       boost::asio::any_completion_handler<latch_state_signature> h)
{
    auto hp = std::make_shared<boost::asio::any_completion_handler<latch_state_signature>>(std::move(h));
    ensure_session([self = shared_from_this(), name, hp](error_code ec) {
        if (ec)
            return dlock::detail::post_completion(self->ex, std::move(*hp), ec, latch_state{});
        auto fresh = self->server_time && clock_type::now() - self->server_time->second < std::chrono::seconds(10);
        auto st = std::make_shared<impl::latch_replies>();
        st->pending = fresh ? 1 : 2;
        auto next = [self, name, hp, st] {
            if (--st->pending > 0)
                return;
            if (st->clock_rc != ZOK && st->clock_rc != 1 && st->clock_rc != ZNONODE)
                return dlock::detail::post_completion(
                    self->ex, std::move(*hp), self->to_error(st->clock_rc, "set " + self->clock_path()), latch_state{});
            if (st->latch_rc == ZNONODE)
                return dlock::detail::post_completion(self->ex, std::move(*hp), error_code(), latch_state{});
            if (st->latch_rc != ZOK)
                return dlock::detail::post_completion(self->ex, std::move(*hp),
                                                      self->to_error(st->latch_rc, "read " + self->latch_path(name)),
                                                      latch_state{});
            self->note_server_time(st->now);
            auto c = zookeeper::latch_node::decode(st->data);
            if (!c)
                return dlock::detail::post_completion(self->ex, std::move(*hp), error_code(), latch_state{});
            auto now = self->server_time ? self->estimated_server_time() : st->stat.mtime;
            if (zookeeper::latch_node::expired(*c, st->stat.mtime, now)) {
                if (self->zk)
                    self->zk->remove(
                        self->latch_path(name), [](int) {}, st->stat.version);  // if unchanged since
                return dlock::detail::post_completion(self->ex, std::move(*hp), error_code(), latch_state{});
            }
            dlock::detail::post_completion(self->ex, std::move(*hp), error_code(),
                                           latch_state{c->count, zookeeper::latch_node::remaining(*c)});
        };
        if (!fresh)
            self->zk->set(self->clock_path(), "", -1, [st, next](int rc, node_stat s) {
                st->clock_rc = rc;
                st->now = s.mtime;
                next();
            });
        self->zk->get(self->latch_path(name), [st, next](int rc, std::string data, node_stat s) {
            st->latch_rc = rc;
            st->data = std::move(data);
            st->stat = s;
            next();
        });
    });
}

std::int64_t zookeeper_store::impl::estimated_server_time() const
{
    if (!server_time)
        return 0;
    return server_time->first +
           std::chrono::duration_cast<milliseconds>(clock_type::now() - server_time->second).count();
}

// A latch node on a name that another kind asks for: in use unless it expired, then deleted
// (if unchanged since read). `now`: the servers' time from the asker's own write this round
// (0: none; then estimated from an earlier write, and without one the latch counts as alive).
void zookeeper_store::impl::latch_in_use(const std::string& name, std::int64_t now, std::function<void(bool)> done)
{
    if (!zk)
        return done(true);
    zk->get(latch_path(name), [self = shared_from_this(), name, now, done](int rc, std::string data, node_stat s) {
        if (rc == ZNONODE)
            return done(false);
        auto c = rc == ZOK ? zookeeper::latch_node::decode(data) : std::nullopt;
        auto t = now > 0 ? now : self->estimated_server_time();
        if (!c || t == 0 || !zookeeper::latch_node::expired(*c, s.mtime, t))
            return done(true);
        if (self->zk)
            self->zk->remove(
                self->latch_path(name), [](int) {}, s.version);
        done(false);
    });
}

latch_capability* zookeeper_store::latches() noexcept
{
    return this;
}

void zookeeper_store::do_count_down(const std::string& name, const std::string& member, std::uint64_t count,
                                    std::chrono::milliseconds ttl,
                                    boost::asio::any_completion_handler<count_down_signature> h)
{
    auto ec = detail::count_down_refusal(count, member);
    if (!ec && ttl.count() < 1)
        ec = error::invalid_lease;
    else if (!ec)
        ec = impl_->refused(name);
    if (ec)
        return dlock::detail::post_completion(impl_->ex, std::move(h), ec, std::uint64_t{0});
    impl_->count_down(
        std::make_shared<impl::latch_op>(impl::latch_op{name, member, count, ttl, 0, false, std::move(h)}));
}

void zookeeper_store::do_latch_state(const std::string& name,
                                     boost::asio::any_completion_handler<latch_state_signature> h)
{
    if (auto ec = impl_->refused(name))
        return dlock::detail::post_completion(impl_->ex, std::move(h), ec, latch_state{});
    impl_->read_latch(name, std::move(h));
}

}  // namespace dlock
