// SPDX-License-Identifier: BSL-1.0
#include <dlock/error.hpp>
#include <dlock/memcached/store.hpp>

#include "common/lease_checks.hpp"
#include "common/post_completion.hpp"
#include "common/shared_handler.hpp"
#include "common/watch_table.hpp"
#include "core/kind_text.hpp"
#include "memcached/acquire_steps.hpp"
#include "memcached/connection.hpp"
#include "memcached/owner_steps.hpp"
#include "memcached/protocol.hpp"
#include "memcached/recipe.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <functional>
#include <utility>

namespace dlock {

namespace asio = boost::asio;
using boost::system::error_code;
using detail::post_completion;
using memcached::proto::reply;
namespace recipe = memcached::recipe;
namespace proto = memcached::proto;

namespace {

// FNV-1a, for rendezvous hashing of names over servers.
std::uint64_t fnv1a(std::string_view s, std::uint64_t h = 1469598103934665603ULL)
{
    for (unsigned char c : s) {
        h ^= c;
        h *= 1099511628211ULL;
    }
    return h;
}

std::uint64_t mix(std::uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb3fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

using replies = std::vector<reply>;

// The keys of one name and the connection to its server.
struct name_keys : memcached::name_keys {
    memcached::detail::connection* conn = nullptr;
};

}  // namespace

struct memcached_store::impl {
    explicit impl(asio::any_io_executor e) : ex(e), watches(e) {}

    asio::any_io_executor ex;
    memcached::config cfg;
    std::vector<std::unique_ptr<memcached::detail::connection>> conns;
    detail::watch_table watches;

    std::size_t server_of(const std::string& name) const
    {
        std::size_t best = 0;
        std::uint64_t best_score = 0;
        auto h = fnv1a(name);
        for (std::size_t i = 0; i < cfg.servers.size(); ++i) {
            const auto& s = cfg.servers[i];
            auto score = mix(h ^ fnv1a(s.host + ":" + std::to_string(s.port)));
            if (i == 0 || score > best_score) {
                best = i;
                best_score = score;
            }
        }
        return best;
    }

    name_keys keys_of(const std::string& name)
    {
        name_keys k;
        k.lock_text = cfg.ns + ":lock:" + name;
        k.lock = proto::encode_key(k.lock_text);
        k.fence = proto::encode_key(cfg.ns + ":fence:" + name);
        k.contended = proto::encode_key(cfg.ns + ":contended:" + name);
        k.conn = conns[server_of(name)].get();
        return k;
    }
};

namespace {

using conn_t = memcached::detail::connection;
constexpr auto tuple = asio::as_tuple(asio::use_awaitable);

auto exec(conn_t& c, std::string bytes, std::size_t n)
{
    return asio::async_initiate<decltype(tuple), conn_t::exec_signature>(
        [&c](auto h, std::string b, std::size_t n) { c.exec(std::move(b), n, std::move(h)); }, tuple, std::move(bytes),
        n);
}

// An error reply among `rs` (its text kept), else success.
error_code reply_error(const replies& rs, const std::function<void(std::string)>& keep)
{
    for (const auto& r : rs)
        if (auto ec = recipe::error_of(r)) {
            keep(r.text);
            return ec;
        }
    return {};
}

using keeper = std::function<void(std::string)>;


// Sends a machine's steps (acquire_steps, owner_steps) until it is done, then completes `h`
// with `result(ec, machine)` (posted: the exec's completion runs on the I/O executor, not
// necessarily on the handler's own).
template <class Machine, class Signature, class Result>
void run_steps(conn_t& c, std::shared_ptr<Machine> m, const asio::any_io_executor& ex, keeper keep,
               asio::any_completion_handler<Signature> h, Result result)
{
    c.exec(m->bytes(), m->replies(),
           [&c, m, ex, keep = std::move(keep), h = std::move(h), result](error_code ec, replies rs) mutable {
               if (!ec && m->on_replies(rs) != Machine::step::done)
                   return run_steps(c, m, ex, std::move(keep), std::move(h), result);
               if (!ec && !m->text().empty())
                   keep(m->text());
               if (!ec)
                   ec = m->error();
               post_completion(ex, std::move(h), ec, result(ec, *m));
           });
}

}  // namespace

memcached_store::memcached_store(asio::any_io_executor ex, memcached::config cfg) : impl_(std::make_shared<impl>(ex))
{
    if (cfg.servers.empty())
        cfg.servers.push_back({});
    impl_->cfg = std::move(cfg);
    for (const auto& s : impl_->cfg.servers)
        impl_->conns.push_back(
            std::make_unique<conn_t>(ex, memcached::detail::connection_settings{
                                             s.host, s.port, impl_->cfg.connect_timeout, impl_->cfg.request_timeout}));
}

memcached_store::~memcached_store()
{
    close();
}

asio::any_io_executor memcached_store::get_executor() const
{
    return impl_->ex;
}

store_traits memcached_store::traits() const noexcept
{
    store_traits t;
    t.direct_handoff = false;
    t.release_notifications = false;  // memcached has no pub/sub: waiters sleep on holder_ttl
    t.durable_fencing = false;        // a restart or an eviction resets the counter
    t.ttl_granularity = recipe::granularity;
    t.min_ttl = recipe::min_ttl;
    t.max_ttl = recipe::max_ttl;
    return t;
}

std::string memcached_store::describe() const
{
    return "memcached " + memcached::to_url(impl_->cfg) + " ns=" + impl_->cfg.ns;
}

std::size_t memcached_store::server_of(const std::string& name) const
{
    return impl_->server_of(name);
}
std::string memcached_store::lock_key(const std::string& name) const
{
    return impl_->cfg.ns + ":lock:" + name;
}
std::string memcached_store::fence_key(const std::string& name) const
{
    return impl_->cfg.ns + ":fence:" + name;
}

void memcached_store::close()
{
    for (auto& c : impl_->conns)
        c->close();
    impl_->watches.close();
}

// Connects to every server and checks that each speaks the meta protocol (mn → MN).
void memcached_store::do_connect(asio::any_completion_handler<connect_signature> h)
{
    auto keep = keep_error_text();
    asio::co_spawn(
        impl_->ex,
        [self = impl_, keep, h = detail::shared_handler(std::move(h))]() -> asio::awaitable<void> {
            error_code first;
            for (auto& c : self->conns) {
                auto [ec, rs] = co_await exec(*c, proto::mn(), 1);
                if (!ec && !(rs.size() == 1 && rs[0].k == reply::kind::mn))
                    ec = error::protocol_error;
                if (!ec)
                    ec = reply_error(rs, keep);
                if (ec && !first)
                    first = ec;
            }
            detail::post_shared(self->ex, h, first);
        },
        asio::detached);
}

void memcached_store::do_try_acquire(const lease_request& req, asio::any_completion_handler<acquire_signature> h)
{
    if (auto ec = detail::lease_refusal(req.kind, recipe::valid_ttl(req.ttl)))
        return post_completion(impl_->ex, std::move(h), ec, acquire_result{});
    auto k = impl_->keys_of(req.name);
    if (!k.ok())
        return post_completion(impl_->ex, std::move(h), error_code(error::invalid_name), acquire_result{});
    auto keep = keep_error_text();
    run_steps(*k.conn, std::make_shared<memcached::acquire_steps>(k, req.token, req.ttl), impl_->ex, std::move(keep),
              std::move(h),
              [](error_code ec, const memcached::acquire_steps& m) { return ec ? acquire_result{} : m.result(); });
}

void memcached_store::do_renew(const lease_key& key, std::chrono::milliseconds ttl,
                               asio::any_completion_handler<renew_signature> h)
{
    if (!recipe::valid_ttl(ttl))
        return post_completion(impl_->ex, std::move(h), error_code(error::invalid_lease), renew_result{});
    auto k = impl_->keys_of(key.name);
    if (!k.ok())
        return post_completion(impl_->ex, std::move(h), error_code(error::invalid_name), renew_result{});
    auto keep = keep_error_text();
    using memcached::owner_steps;
    run_steps(*k.conn, std::make_shared<owner_steps>(owner_steps::op::renew, k, key.token, ttl), impl_->ex,
              std::move(keep), std::move(h), [](error_code ec, const owner_steps& m) {
                  return ec ? renew_result{} : renew_result{m.owned(), m.contended()};
              });
}

void memcached_store::do_release(const lease_key& key, asio::any_completion_handler<bool_signature> h)
{
    auto k = impl_->keys_of(key.name);
    if (!k.ok())
        return post_completion(impl_->ex, std::move(h), error_code(error::invalid_name), false);
    auto keep = keep_error_text();
    using memcached::owner_steps;
    run_steps(*k.conn, std::make_shared<owner_steps>(owner_steps::op::release, k, key.token), impl_->ex,
              std::move(keep), std::move(h), [](error_code ec, const owner_steps& m) { return !ec && m.owned(); });
}

void memcached_store::do_force_release(const std::string& name, lease_kind side,
                                       asio::any_completion_handler<bool_signature> h)
{
    if (detail::one_side(side))  // no read-write locks here
        return post_completion(impl_->ex, std::move(h), error_code(error::not_supported), false);
    auto k = impl_->keys_of(name);
    if (!k.ok())
        return post_completion(impl_->ex, std::move(h), error_code(error::invalid_name), false);
    auto keep = keep_error_text();
    asio::co_spawn(
        impl_->ex,
        [self = impl_, k, keep, h = detail::shared_handler(std::move(h))]() -> asio::awaitable<void> {
            auto [ec, rs] = co_await exec(*k.conn, proto::md(k.lock, "") + proto::md(k.contended, ""), 2);
            if (!ec)
                ec = reply_error(rs, keep);
            detail::post_shared(self->ex, h, ec, !ec && rs[0].k == reply::kind::hd);
        },
        asio::detached);
}

void memcached_store::do_status(const std::string& name, asio::any_completion_handler<status_signature> h)
{
    auto k = impl_->keys_of(name);
    if (!k.ok())
        return post_completion(impl_->ex, std::move(h), error_code(error::invalid_name), lock_status{});
    auto keep = keep_error_text();
    asio::co_spawn(
        impl_->ex,
        [self = impl_, k, keep, h = detail::shared_handler(std::move(h))]() -> asio::awaitable<void> {
            auto [ec, rs] = co_await exec(*k.conn, proto::mg(k.lock, "v c t") + proto::mg(k.fence, "v"), 2);
            lock_status st;
            recipe::lock_view v;
            if (!ec)
                ec = reply_error(rs, keep);
            if (!ec)
                ec = recipe::read_lock(rs[0], v);
            std::uint64_t counter = 0;
            if (!ec && rs[1].k != reply::kind::en)
                ec = recipe::read_counter(rs[1], counter);
            if (!ec) {
                st.held = v.present;
                st.holder = v.owner;
                st.fencing_token = v.fence;
                st.ttl = v.present && v.ttl_s >= 0 ? std::chrono::milliseconds(v.ttl_s * 1000)
                                                   : std::chrono::milliseconds(-1);
                st.last_fencing_token = counter;
            }
            st.key = k.lock_text;
            detail::post_shared(self->ex, h, ec, st);
        },
        asio::detached);
}

// No notifications: `ready` at once (posted), then nothing. A waiter sleeps until the
// holder's remaining lease and retries.
store::watch_id memcached_store::watch(const std::string& name, const std::string&, watch_callback cb)
{
    return impl_->watches.add_live(name, std::move(cb)).id;
}

void memcached_store::unwatch(watch_id id)
{
    impl_->watches.remove(id);
}

}  // namespace dlock
