// SPDX-License-Identifier: BSL-1.0
// zookeeper_store: the contract's entry points (include/dlock/zookeeper/store.hpp) over the
// driver's steps in this folder (store_impl.hpp says which file holds which).
#include "core/kind_text.hpp"
#include "zookeeper/semaphore_layout.hpp"
#include "zookeeper/store_impl.hpp"

#include <zookeeper/zookeeper.h>

#include <algorithm>

namespace dlock {

namespace asio = boost::asio;
using boost::system::error_code;
using dlock::detail::ms_until;
using dlock::detail::post_moved;
using std::chrono::milliseconds;
using clock_type = std::chrono::steady_clock;
using zookeeper::detail::node_stat;
namespace recipe = zookeeper::recipe;

namespace {

// A server closes the connection on a request larger than its jute.maxbuffer (1 MiB - 1
// unless configured): the same request would then fail as a lost connection for ever. A
// contender's create is its path, node name, token and some 200 bytes of framing.
constexpr std::size_t max_request = 0xfffff;
constexpr std::size_t request_overhead = 512;

}  // namespace

// Why a name's lock path cannot be sent (empty if it can), for the error text.
std::string zookeeper_store::impl::too_long(const std::string& path, std::size_t token_size)
{
    auto size = path.size() + 64 + token_size + request_overhead;
    if (size <= max_request)
        return {};
    return "zookeeper: the lock path of " + std::to_string(path.size()) +
           " bytes makes a request larger than ZooKeeper's servers take (jute.maxbuffer, " +
           std::to_string(max_request) + " bytes unless configured): a lock name this long cannot be used";
}

error_code zookeeper_store::impl::refused(const std::string& name)
{
    if (closed)
        return error::closed;
    auto text = too_long(path_of(name), 0);
    if (text.empty())
        return {};
    set_text(std::move(text));
    return error::invalid_name;
}

zookeeper_store::zookeeper_store(asio::any_io_executor ex, zookeeper::config cfg)
    : impl_(std::make_shared<impl>(ex, std::move(cfg), keep_error_text()))
{
}

zookeeper_store::~zookeeper_store()
{
    close();
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
    t.kinds |= static_cast<unsigned>(lease_kind::read) | static_cast<unsigned>(lease_kind::write) |
               static_cast<unsigned>(lease_kind::leader) | static_cast<unsigned>(lease_kind::permit);
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
    return impl_->watches.add_session(std::move(cb));
}

store::watch_id zookeeper_store::watch(const std::string& name, const std::string& token, watch_callback cb)
{
    auto& m = *impl_;
    auto added = m.watches.add(name, token, std::move(cb));  // a token's queued node anchors its wait
    if (added.starts_name && !m.closed) {
        m.names[name];
        m.arm_name(name);
    }
    return added.id;
}

void zookeeper_store::unwatch(watch_id id)
{
    if (auto name = impl_->queue.unwatched(impl_->watches.remove(id)))
        impl_->names.erase(*name);  // its watch fires once more, into nothing
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
    m.queue.end_all(false);
    m.names.clear();
    m.permit_waits.clear();
    m.watches.close();
    m.opening_ended(error::closed);
    m.session_id = 0;
    m.life.end();
    m.drop_client();  // the session ends: every node of ours goes now
}

// ---- operations ----------------------------------------------------------------------

void zookeeper_store::do_connect(asio::any_completion_handler<connect_signature> h)
{
    auto hp = std::make_shared<asio::any_completion_handler<connect_signature>>(std::move(h));
    impl_->ensure_session([self = impl_, hp](error_code ec) { post_moved(self->ex, *hp, ec); });
}

void zookeeper_store::do_try_acquire(const lease_request& req, asio::any_completion_handler<acquire_signature> h)
{
    auto& m = *impl_;
    if (m.closed)
        return post_moved(m.ex, h, error_code(error::closed), acquire_result{});
    if (!(traits().kinds & static_cast<unsigned>(req.kind))) {
        set_error_text("zookeeper: this store serves mutexes, read-write locks, semaphores and elections only");
        return post_moved(m.ex, h, error_code(error::not_supported), acquire_result{});
    }
    if (req.kind == lease_kind::permit && req.capacity == 0) {
        set_error_text("zookeeper: a semaphore needs at least one permit");
        return post_moved(m.ex, h, error_code(error::invalid_option), acquire_result{});
    }
    std::string why;
    auto path = recipe::lock_path(m.cfg.root, req.name, why);
    if (path.empty()) {
        set_error_text("zookeeper: " + why);
        return post_moved(m.ex, h, error_code(error::invalid_name), acquire_result{});
    }
    if (auto long_path = impl::too_long(path, req.token.size()); !long_path.empty()) {
        set_error_text(std::move(long_path));
        return post_moved(m.ex, h, error_code(error::invalid_name), acquire_result{});
    }
    m.acquire(req, std::move(h), false);
}

void zookeeper_store::do_renew(const lease_key& k, std::chrono::milliseconds,
                               asio::any_completion_handler<renew_signature> h)
{
    auto& m = *impl_;
    if (m.closed)
        return post_moved(m.ex, h, error_code(error::closed), renew_result{});
    auto& held = k.kind == lease_kind::permit ? m.leases : m.nodes;
    auto it = held.find({k.name, k.token});
    auto node = !k.ref.empty() ? k.ref : it != held.end() ? it->second.node : std::string();
    if (node.empty() || !m.session_id || !m.zk)
        return post_moved(m.ex, h, error_code(), renew_result{});  // no session: nothing of ours exists
    bool permit = k.kind == lease_kind::permit;
    auto waiters = permit ? m.round_path(k.name, k.kind) : node.substr(0, node.rfind('/'));
    auto sid = m.session_id;
    auto hp = std::make_shared<asio::any_completion_handler<renew_signature>>(std::move(h));
    // Our node, and behind it the children (the same round trip): a contender waiting for
    // ours, of any session, is `contended`.
    struct replies {
        int exists_rc = 1, children_rc = 1, leases_rc = 1;  // 1: not come yet
        node_stat stat, leases;
        std::vector<std::string> children;
    };
    auto st = std::make_shared<replies>();
    st->leases_rc = permit ? 1 : 0;
    auto done = [self = impl_, sid, name = k.name, node, permit, hp, st] {
        if (st->exists_rc == 1 || st->children_rc == 1 || st->leases_rc == 1)
            return;  // a reply is still due
        int rc = st->exists_rc;
        if (rc != ZOK && rc != ZNONODE)
            return post_moved(self->ex, *hp, self->to_error(rc, "confirming a node"), renew_result{});
        renew_result res{rc == ZOK && st->stat.ephemeral_owner == sid && self->session_id == sid, false};
        auto ours = std::string_view(node).substr(node.rfind('/') + 1);
        if (st->children_rc == ZOK && !permit)
            res.contended = recipe::waited_for(recipe::contenders(std::move(st->children)), ours);
        // A semaphore's holder is waited for while someone is under `locks` and every permit is taken.
        auto permits = static_cast<std::int32_t>(zookeeper::semaphore_layout::permits_of(ours).value_or(1));
        if (st->children_rc == ZOK && permit)
            res.contended = !st->children.empty() && st->leases_rc == ZOK && st->leases.num_children >= permits;
        if (auto it = self->contended.find(name); it != self->contended.end()) {
            res.contended = true;  // this store's own attempt found it taken
            self->contended.erase(it);
        }
        res.contended = res.contended && res.owned;
        post_moved(self->ex, *hp, error_code(), res);
    };
    m.zk->exists(node, [st, done](int rc, node_stat s) {
        st->exists_rc = rc;
        st->stat = s;
        done();
    });
    if (permit)
        m.zk->exists(node.substr(0, node.rfind('/')), [st, done](int rc, node_stat s) {
            st->leases_rc = rc;
            st->leases = s;
            done();
        });
    m.zk->get_children(waiters, [st, done](int rc, std::vector<std::string> children) {
        st->children_rc = rc == ZNONODE ? ZOK : rc;
        st->children = std::move(children);
        done();
    });
}


void zookeeper_store::do_release(const lease_key& k, asio::any_completion_handler<bool_signature> h)
{
    impl_->release(k, std::move(h));
}

void zookeeper_store::do_force_release(const std::string& name, lease_kind side,
                                       asio::any_completion_handler<bool_signature> h)
{
    auto& m = *impl_;
    if (auto ec = m.refused(name))
        return post_moved(m.ex, h, ec, false);
    auto hp = std::make_shared<asio::any_completion_handler<bool_signature>>(std::move(h));
    m.ensure_session([self = impl_, name, side, hp](error_code ec) {
        if (ec)
            return post_moved(self->ex, *hp, ec, false);
        auto path = self->path_of(name);
        self->zk->get_children(path, [self, name, side, path, hp](int rc, std::vector<std::string> children) {
            if (rc == ZNONODE)
                return post_moved(self->ex, *hp, error_code(), false);
            if (rc != ZOK)
                return post_moved(self->ex, *hp, self->to_error(rc, "children of " + path), false);
            auto sorted = recipe::contenders(children);
            bool sided = detail::one_side(side);
            if (sorted.empty() && !sided && zookeeper::semaphore_layout::has_semaphore(children))
                return self->force_release_permits(name, hp);
            // Every holder: the mutex's or the writer's node, or every reader before a writer;
            // one side of a read-write lock: those of its kind only.
            auto held = recipe::holders(sorted);
            auto kind = side == lease_kind::read ? recipe::node_kind::read : recipe::node_kind::write;
            if (sided)
                std::erase_if(held, [&](auto& c) { return recipe::parse_contender(c)->kind != kind; });
            self->remove_nodes(path, held, hp);
        });
    });
}

void zookeeper_store::impl::remove_nodes(const std::string& path, const std::vector<std::string>& children,
                                         const release_ptr& hp)
{
    if (children.empty())
        return post_moved(ex, *hp, error_code(), false);
    auto left = std::make_shared<std::size_t>(children.size());
    auto out = std::make_shared<std::pair<error_code, bool>>();
    for (auto& node : children)
        zk->remove(path + "/" + node, [self = shared_from_this(), hp, left, out](int rc) {
            if (rc == ZOK)
                out->second = true;
            else if (rc != ZNONODE && !out->first)
                out->first = self->to_error(rc, "delete");
            if (--*left == 0)
                post_moved(self->ex, *hp, out->first, out->first ? false : out->second);
        });
}

}  // namespace dlock
