// SPDX-License-Identifier: BSL-1.0
// What a name holds: its contenders' status, and an election's leader with the value it
// proclaimed, kept as the leader node's data (LeaderLatch's participant id, so Curator's
// getLeader() reads dlock's value and dlock reads Curator's id).
#include "zookeeper/semaphore_layout.hpp"
#include "zookeeper/store_impl.hpp"

#include <zookeeper/zookeeper.h>

#include <algorithm>

namespace dlock {

namespace asio = boost::asio;
using boost::system::error_code;
using dlock::detail::ms_until;
using dlock::detail::post_moved;
using zookeeper::detail::node_stat;
namespace recipe = zookeeper::recipe;

void zookeeper_store::impl::read_status(const std::string& name,
                                        std::function<void(error_code, lock_status, std::string)> done)
{
    ensure_session([self = shared_from_this(), name, done](error_code ec) {
        if (ec)
            return done(ec, lock_status{}, std::string());
        auto path = self->path_of(name);
        self->zk->get_children(path, [self, name, path, done](int rc, std::vector<std::string> children) {
            lock_status s;
            if (rc == ZNONODE)
                return done(error_code(), s, std::string());
            if (rc != ZOK)
                return done(self->to_error(rc, "children of " + path), s, std::string());
            auto sorted = recipe::contenders(children);
            if (sorted.empty() && zookeeper::semaphore_layout::has_semaphore(children))
                return self->semaphore_status(name, done);
            if (sorted.empty())
                return done(error_code(), s, std::string());
            auto held = recipe::holders(sorted);
            // What the path is in use as: its first node's layout (a later node of another
            // layout is refused and withdrawn).
            auto family = recipe::family_of(recipe::parse_contender(sorted.front())->kind);
            s.held = true;
            s.key = path + "/" + sorted.front();
            s.holders = held.size();
            s.queued = sorted.size() - held.size();
            if (family == recipe::path_family::read_write) {
                s.kind = lease_kind::read;  // the contract's word for a read-write lock's name
                s.writer = recipe::parse_contender(held.front())->kind == recipe::node_kind::write;
            } else if (family == recipe::path_family::election) {
                s.kind = lease_kind::leader;
            }
            // The holder's data (its token; a candidate's value; Curator writes its address or
            // id) and czxid, then the others' czxids for the highest token issued.
            auto left = std::make_shared<std::size_t>(sorted.size());
            auto out = std::make_shared<lock_status>(std::move(s));
            auto first = std::make_shared<std::string>();
            for (std::size_t i = 0; i < sorted.size(); ++i)
                self->zk->get(path + "/" + sorted[i],
                              [self, done, left, out, first, i](int rc, std::string data, node_stat st) {
                                  if (rc == ZOK) {
                                      if (i == 0) {
                                          if (out->kind != lease_kind::leader)
                                              out->holder = data;
                                          *first = std::move(data);
                                          out->fencing_token = static_cast<std::uint64_t>(st.czxid);
                                          // A holder of this session has what the session has left;
                                          // the servers tell no client how long another session has.
                                          if (st.ephemeral_owner != 0 && st.ephemeral_owner == self->session_id)
                                              out->ttl = ms_until(self->deadline(), clock_type::now());
                                      }
                                      out->last_fencing_token =
                                          std::max(out->last_fencing_token, static_cast<std::uint64_t>(st.czxid));
                                  }
                                  if (--*left == 0)
                                      done(error_code(), std::move(*out), std::move(*first));
                              });
        });
    });
}

// Status, and with `with_value` an election's leader with its value: one read.
void zookeeper_store::impl::answer_status(const std::string& name, asio::any_completion_handler<status_signature> h,
                                          bool with_value)
{
    if (auto ec = refused(name))
        return post_moved(ex, h, ec, lock_status{});
    auto hp = std::make_shared<asio::any_completion_handler<status_signature>>(std::move(h));
    read_status(name, [self = shared_from_this(), hp, with_value](error_code ec, lock_status s, std::string data) {
        // A candidate that has proclaimed nothing yet has no data: no value.
        if (with_value && !ec && s.held && s.kind == lease_kind::leader && !data.empty())
            s.value = std::move(data);
        post_moved(self->ex, *hp, ec, std::move(s));
    });
}

void zookeeper_store::do_status(const std::string& name, asio::any_completion_handler<status_signature> h)
{
    impl_->answer_status(name, std::move(h), false);
}

void zookeeper_store::do_leader(const std::string& name, asio::any_completion_handler<leader_signature> h)
{
    impl_->answer_status(name, std::move(h), true);
}

// The value goes into our node if it still leads: first among the contenders now. A node
// cannot fall back behind another (sequences only grow), so only its deletion can come
// between the read and the write, and then the write finds no node.
void zookeeper_store::do_proclaim(const lease_key& key, const std::string& value,
                                  asio::any_completion_handler<proclaim_signature> h)
{
    auto& m = *impl_;
    if (m.closed)
        return post_moved(m.ex, h, error_code(error::closed), false);
    auto it = m.nodes.find({key.name, key.token});
    auto node = !key.ref.empty() ? key.ref : it != m.nodes.end() ? it->second.node : std::string();
    if (node.empty() || !m.session_id || !m.zk)
        return post_moved(m.ex, h, error_code(), false);  // no session: nothing of ours exists
    auto hp = std::make_shared<asio::any_completion_handler<proclaim_signature>>(std::move(h));
    auto path = node.substr(0, node.rfind('/'));
    m.zk->get_children(path, [self = impl_, node, path, value, hp](int rc, std::vector<std::string> children) {
        if (rc != ZOK && rc != ZNONODE)
            return post_moved(self->ex, *hp, self->to_error(rc, "children of " + path), false);
        auto sorted = recipe::contenders(std::move(children));
        if (sorted.empty() || path + "/" + sorted.front() != node || !self->zk)
            return post_moved(self->ex, *hp, error_code(), false);
        self->zk->set(node, value, [self, hp](int rc) {
            if (rc != ZOK && rc != ZNONODE)
                return post_moved(self->ex, *hp, self->to_error(rc, "proclaiming"), false);
            post_moved(self->ex, *hp, error_code(), rc == ZOK);
        });
    });
}

}  // namespace dlock
