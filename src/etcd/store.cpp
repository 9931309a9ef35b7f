// SPDX-License-Identifier: BSL-1.0
// etcd_store: the contract's entry points (include/dlock/etcd/store.hpp) over the driver's
// steps in this folder (store_impl.hpp says which file holds which).
#include "core/kind_text.hpp"
#include "etcd/store_impl.hpp"

namespace dlock {

namespace asio = boost::asio;
using namespace etcd::detail;
using boost::system::error_code;
using dlock::detail::post_moved;
using std::chrono::milliseconds;
using clock_type = std::chrono::steady_clock;

error_code etcd_store::impl::reply_failed(error_code ec, const http_reply& r, reply_error& err)
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

etcd_store::etcd_store(asio::any_io_executor ex, etcd::config cfg)
    : impl_(std::make_shared<impl>(ex, std::move(cfg), keep_error_text()))
{
}

etcd_store::~etcd_store()
{
    close();
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
    t.kinds = static_cast<unsigned>(lease_kind::mutex) | static_cast<unsigned>(lease_kind::leader) |
              static_cast<unsigned>(lease_kind::permit) | static_cast<unsigned>(lease_kind::read) |
              static_cast<unsigned>(lease_kind::write);
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
    return impl_->lease ? impl_->life.info() : session_info{};
}

store::watch_id etcd_store::watch_session(std::function<void(session_event, const session_info&)> cb)
{
    return impl_->watches.add_session(std::move(cb));
}

store::watch_id etcd_store::watch(const std::string& name, const std::string& token, watch_callback cb)
{
    auto& m = *impl_;
    auto added = m.watches.add(name, token, std::move(cb));
    if (added.starts_name && !m.closed)
        m.start_name_stream(name);
    return added.id;
}

void etcd_store::unwatch(watch_id id)
{
    if (auto name = impl_->queue.unwatched(impl_->watches.remove(id)))
        impl_->stop_name_stream(*name);
}

void etcd_store::close()
{
    auto& m = *impl_;
    if (m.closed)
        return;
    m.closed = true;
    m.keepalive_timer.cancel();
    m.deadline_timer.cancel();
    m.queue.end_all(false);
    m.stop_permit_waits(false);
    for (auto& [n, ns] : std::map(m.names))
        m.stop_name_stream(n);
    m.watches.close();
    m.gate.opened(error::closed);
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

void etcd_store::do_connect(asio::any_completion_handler<connect_signature> h)
{
    auto& m = *impl_;
    if (m.closed)
        return post_moved(m.ex, h, error_code(error::closed));
    if (m.probed)
        return post_moved(m.ex, h, error_code());
    // A connect checks that the members answer as etcd; the lease waits for the first acquire.
    m.request("/v3/maintenance/status", "{}", [self = impl_, h = std::move(h)](error_code ec, http_reply r) mutable {
        reply_error err;
        if (auto e = self->reply_failed(ec, r, err))
            return post_moved(self->ex, h, e);
        if (r.body.find("\"version\"") == std::string::npos) {
            self->set_text("etcd " + self->pool.current() + ": the server did not answer as an etcd v3 gateway");
            return post_moved(self->ex, h, error_code(error::protocol_error));
        }
        self->probed = true;
        post_moved(self->ex, h, error_code());
    });
}

void etcd_store::do_try_acquire(const lease_request& req, asio::any_completion_handler<acquire_signature> h)
{
    auto& m = *impl_;
    if (m.closed)
        return post_moved(m.ex, h, error_code(error::closed), acquire_result{});
    if (!(traits().kinds & static_cast<unsigned>(req.kind))) {
        set_error_text("etcd: this store serves mutexes, read-write locks, semaphores and elections only");
        return post_moved(m.ex, h, error_code(error::not_supported), acquire_result{});
    }
    if (req.kind == lease_kind::permit && req.capacity == 0) {
        set_error_text("etcd: a semaphore needs at least one permit");
        return post_moved(m.ex, h, error_code(error::invalid_option), acquire_result{});
    }
    if (req.ttl.count() <= 0 || req.ttl.count() % 1000 != 0 || req.ttl > traits().max_ttl) {
        set_error_text("etcd: leases are whole seconds from 1 s (got " + std::to_string(req.ttl.count()) + " ms)");
        return post_moved(m.ex, h, error_code(error::invalid_lease), acquire_result{});
    }
    m.acquire(req, std::move(h), false);
}

void etcd_store::do_renew(const lease_key& k, std::chrono::milliseconds,
                          asio::any_completion_handler<renew_signature> h)
{
    auto& m = *impl_;
    if (m.closed)
        return post_moved(m.ex, h, error_code(error::closed), renew_result{});
    auto key = k.ref.empty() ? m.key_for(k.name, k.token, k.kind) : k.ref;
    if (key.empty())
        return post_moved(m.ex, h, error_code(), renew_result{});  // no lease: nothing of ours exists
    // Others wait while the range has more keys than holders: one, or a semaphore's permits;
    // a reader is waited for by any writer (they are all after it while it holds).
    auto it = m.permit_values.find({k.name, k.token});
    std::int64_t holders = k.kind == lease_kind::permit && it != m.permit_values.end() ? it->second.permits
                           : k.kind == lease_kind::read                                ? 0
                                                                                       : 1;
    auto counted = k.kind == lease_kind::read ? side_prefix(m.range_of(k.name), true) : m.range_of(k.name);
    m.request(txn_path, confirm_txn(m.our_key_of(k, key), counted),
              [self = impl_, name = k.name, holders, h = std::move(h)](error_code ec, http_reply r) mutable {
                  reply_error err;
                  confirm_reply c;
                  ec = self->decode(
                      ec, r, [&](std::string_view b, reply_error& e) { return parse_confirm(b, c, e); }, err);
                  if (ec)
                      return post_moved(self->ex, h, ec, renew_result{});
                  renew_result res{c.owned, c.owned && c.count > holders};
                  if (auto it = self->contended.find(name); c.owned && it != self->contended.end()) {
                      res.contended = true;  // another token of this store asked meanwhile
                      self->contended.erase(it);
                  }
                  post_moved(self->ex, h, error_code(), res);
              });
}

void etcd_store::do_release(const lease_key& k, asio::any_completion_handler<bool_signature> h)
{
    impl_->release(k, std::move(h));
}

void etcd_store::do_force_release(const std::string& name, lease_kind side,
                                  asio::any_completion_handler<bool_signature> h)
{
    auto& m = *impl_;
    if (m.closed)
        return post_moved(m.ex, h, error_code(error::closed), false);
    m.request(range_path, range_request(m.range_of(name)),
              [self = impl_, range = m.range_of(name), side, h = std::move(h)](error_code ec, http_reply r) mutable {
                  reply_error err;
                  range_reply rr;
                  ec = self->decode(
                      ec, r, [&](std::string_view b, reply_error& e) { return parse_range(b, rr, e); }, err);
                  if (ec || rr.kvs.empty())
                      return post_moved(self->ex, h, ec, false);
                  auto held = self->holders_of(range, std::move(rr.kvs));
                  // One side of a read-write lock: its keys only (a mutex's or a semaphore's are neither).
                  if (detail::one_side(side)) {
                      auto mine = side_prefix(range, side == lease_kind::write);
                      std::erase_if(held, [&](auto& kv) { return kv.key.rfind(mine, 0) != 0; });
                  }
                  if (held.empty())
                      return post_moved(self->ex, h, error_code(), false);
                  self->delete_holders(std::move(held), std::move(h));
              });
}

// The keys that hold now, of a name's keys oldest first: the first (a mutex's, a writer's), a
// semaphore's first N, or every reader before the first writer.
std::vector<etcd::detail::key_value> etcd_store::impl::holders_of(std::string_view range,
                                                                  std::vector<etcd::detail::key_value> kvs)
{
    std::size_t n = 1;
    if (!kvs.empty() && is_rw_key(range, kvs[0].key) && kvs[0].key.rfind(side_prefix(range, true), 0) != 0)
        n = static_cast<std::size_t>(
            std::find_if(kvs.begin(), kvs.end(),
                         [&](auto& kv) { return kv.key.rfind(side_prefix(range, true), 0) == 0; }) -
            kvs.begin());
    else if (!kvs.empty())
        n = permits_in(kvs[0].value).value_or(1);
    kvs.resize(std::min(kvs.size(), n));
    return kvs;
}

// Deletes each key only if it is still that key (not a successor's): true if any was.
void etcd_store::impl::delete_holders(std::vector<etcd::detail::key_value> kvs,
                                      asio::any_completion_handler<bool_signature> h)
{
    auto left = std::make_shared<std::size_t>(kvs.size());
    auto out = std::make_shared<std::pair<error_code, bool>>();
    auto hp = std::make_shared<asio::any_completion_handler<bool_signature>>(std::move(h));
    for (auto& kv : kvs)
        request(txn_path, delete_if_created_txn(kv.key, kv.create_revision),
                [self = shared_from_this(), left, out, hp](error_code ec, http_reply r) mutable {
                    reply_error err;
                    bool deleted = false;
                    ec = self->decode(
                        ec, r, [&](std::string_view b, reply_error& e) { return parse_succeeded(b, deleted, e); }, err);
                    if (ec && !out->first)
                        out->first = ec;
                    out->second = out->second || deleted;
                    if (--*left == 0)
                        post_moved(self->ex, *hp, out->first, out->first ? false : out->second);
                });
}

}  // namespace dlock
