// SPDX-License-Identifier: BSL-1.0
#include <dlock/error.hpp>
#include <dlock/postgres/store.hpp>

#include "common/lease_checks.hpp"
#include "common/post_completion.hpp"
#include "common/shared_handler.hpp"
#include "common/sql_reply.hpp"
#include "common/sql_store_kit.hpp"
#include "common/watch_table.hpp"
#include "core/kind_text.hpp"
#include "postgres/connection.hpp"
#include "postgres/set_sql.hpp"
#include "postgres/sql.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <limits>
#include <utility>

namespace dlock {

namespace asio = boost::asio;
using boost::system::error_code;
using detail::post_completion;
using conn_t = postgres::detail::connection;
namespace sql = postgres::sql;

struct postgres_store::impl : std::enable_shared_from_this<impl> {
    explicit impl(asio::any_io_executor e) : ex(e), watches(e, detail::watch_table::tokens::with_name) {}

    asio::any_io_executor ex;
    postgres::config cfg;
    postgres::sql::statements st;
    postgres::sql::set_statements sets;  // read-write locks and semaphores
    std::unique_ptr<conn_t> conn;
    std::unique_ptr<conn_t> listener;  // LISTEN dlock; started by the first watch
    // A queued token lives by the listener's backend: tokened watchers wait for LISTEN too.
    detail::watch_table watches;
    bool listening = false;
    std::string bad_config;  // why the config was refused (empty: it was not)

    // LISTEN ran (again): `ready` for new watchers, `resync` for those that may have missed one.
    void on_listening()
    {
        listening = true;
        for (const auto& name : watches.names()) {
            watches.tell_name(name, watch_event::resync);
            watches.name_ready(name);
        }
    }
    void on_listener_down()
    {
        listening = false;
        for (const auto& name : watches.names())
            watches.name_down(name);
    }

    void on_notify(const std::string& channel, const std::string& payload)
    {
        if (channel == postgres::sql::grant_channel) {
            postgres::sql::grant g;
            if (postgres::sql::decode_grant(payload, g) && !g.token.empty())
                watches.tell(g.name, g.token, watch_event::granted, g.notice);
            return;
        }
        if (channel == postgres::sql::channel)
            watches.tell_name(payload, watch_event::released);
    }

    // The backend that LISTENs for this store: a queued token is live while it exists. 0 (do
    // not queue) while the listener is down: the waiter is woken by `resync` and re-queues.
    int listener_pid() const { return listening && listener ? listener->backend_pid() : 0; }

    void start_listener()
    {
        if (listener || !bad_config.empty())
            return;
        postgres::detail::connection_settings ls{{cfg, postgres::sql::listen()}, true};
        std::weak_ptr<impl> weak = weak_from_this();
        ls.on_up = [weak] {
            if (auto self = weak.lock())
                self->on_listening();
        };
        ls.on_down = [weak] {
            if (auto self = weak.lock())
                self->on_listener_down();
        };
        ls.on_notify = [weak](const std::string& c, const std::string& p) {
            if (auto self = weak.lock())
                self->on_notify(c, p);
        };
        listener = std::make_unique<conn_t>(ex, std::move(ls));
        listener->start();
    }
};

namespace {

constexpr auto tuple = asio::as_tuple(asio::use_awaitable);

auto exec(conn_t& c, const std::string& text, std::vector<std::string> params)
{
    return asio::async_initiate<decltype(tuple), conn_t::exec_signature>(
        [&c](auto h, std::string t, std::vector<std::string> p) { c.exec(std::move(t), std::move(p), std::move(h)); },
        tuple, text, std::move(params));
}

std::string ms(std::chrono::milliseconds d)
{
    return std::to_string(d.count());
}

}  // namespace

postgres_store::postgres_store(asio::any_io_executor ex, postgres::config cfg) : impl_(std::make_shared<impl>(ex))
{
    impl_->bad_config = detail::refuse_table(cfg.table, postgres::check_table(cfg.table), "postgres_store");
    impl_->cfg = std::move(cfg);
    impl_->st = postgres::sql::make_statements(impl_->cfg.table);
    impl_->sets = postgres::sql::make_set_statements(impl_->cfg.table);
    postgres::detail::connection_settings cs{{impl_->cfg, impl_->st.setup}};
    cs.refused = impl_->bad_config;
    impl_->conn = std::make_unique<conn_t>(ex, std::move(cs));
}

postgres_store::~postgres_store()
{
    close();
}

asio::any_io_executor postgres_store::get_executor() const
{
    return impl_->ex;
}

const postgres::config& postgres_store::config() const noexcept
{
    return impl_->cfg;
}

store_traits postgres_store::traits() const noexcept
{
    auto t = detail::sql_traits();
    t.kinds |= static_cast<unsigned>(lease_kind::read) | static_cast<unsigned>(lease_kind::write) |
               static_cast<unsigned>(lease_kind::permit);
    t.direct_handoff = true;
    t.release_notifications = true;
    return t;
}

std::string postgres_store::describe() const
{
    return "postgresql " + postgres::to_url(impl_->cfg) + " table=" + impl_->cfg.table;
}

void postgres_store::close()
{
    impl_->conn->close();
    if (impl_->listener)
        impl_->listener->close();
    impl_->listening = false;
    impl_->watches.close();
}


// Connects and runs the setup (the table and sequence if missing): checks credentials,
// the database and the privileges once.
void postgres_store::do_connect(asio::any_completion_handler<connect_signature> h)
{
    impl_->conn->exec("SELECT 1", {}, detail::connect_reply<sql::result>(impl_->ex, keep_error_text(), std::move(h)));
}

void postgres_store::do_try_acquire(const lease_request& req, asio::any_completion_handler<acquire_signature> h)
{
    if (auto ec = detail::lease_refusal(lease_kind::mutex, detail::sql_valid_ttl(req.ttl));
        ec || (ec = detail::key_refusal(sql::check_name(req.name), sql::check_name(req.token))))
        return post_completion(impl_->ex, std::move(h), ec, acquire_result{});
    if (req.kind != lease_kind::mutex)
        return acquire_in_set(req, std::move(h));
    const int pid = req.queue ? impl_->listener_pid() : 0;
    impl_->conn->exec(impl_->st.acquire, {req.name, req.token, ms(req.ttl), std::to_string(pid)},
                      [ex = impl_->ex, keep = keep_error_text(), ttl = req.ttl,
                       h = std::move(h)](error_code ec, sql::result res) mutable {
                          acquire_result out;
                          std::optional<std::uint64_t> set_permits;
                          if (!ec && !sql::decode_acquire(res, ttl, out, set_permits))
                              ec = error::protocol_error;
                          if (!ec && set_permits) {
                              ec = error::kind_mismatch;
                              keep("postgres: the name is " +
                                   detail::kind_name_of_code(static_cast<long long>(*set_permits)) + ", not a mutex");
                          } else if (ec && !res.message.empty()) {
                              keep(res.message);
                          }
                          post_completion(ex, std::move(h), ec, ec ? acquire_result{} : out);
                      });
}

// A read-write lock's or a semaphore's lease: the set's function, in the name's turn.
void postgres_store::acquire_in_set(const lease_request& req, asio::any_completion_handler<acquire_signature> h)
{
    if (req.kind == lease_kind::permit &&
        (req.capacity == 0 || req.capacity > static_cast<unsigned>(std::numeric_limits<int>::max())))
        return post_completion(impl_->ex, std::move(h), error_code(error::invalid_option), acquire_result{});
    const int pid = req.queue ? impl_->listener_pid() : 0;
    const unsigned permits = req.kind == lease_kind::permit ? req.capacity : 0;
    impl_->conn->exec(impl_->sets.acquire,
                      {req.name, req.token, ms(req.ttl), std::to_string(pid),
                       std::string(1, detail::set_kind_letter(req.kind)), std::to_string(permits)},
                      [ex = impl_->ex, keep = keep_error_text(), ttl = req.ttl,
                       h = std::move(h)](error_code ec, sql::result res) mutable {
                          acquire_result out;
                          long long what = 0;
                          if (!ec)
                              ec = sql::decode_set_acquire(res, ttl, out, what);
                          if (ec == error::kind_mismatch)
                              keep("postgres: the name is " + detail::kind_name_of_code(what));
                          else if (ec && !res.message.empty())
                              keep(res.message);
                          post_completion(ex, std::move(h), ec, ec ? acquire_result{} : out);
                      });
}

void postgres_store::do_renew(const lease_key& key, std::chrono::milliseconds ttl,
                              asio::any_completion_handler<renew_signature> h)
{
    if (auto ec = detail::lease_refusal(lease_kind::mutex, detail::sql_valid_ttl(ttl));
        ec || (ec = detail::key_refusal(sql::check_name(key.name), sql::check_name(key.token))))
        return post_completion(impl_->ex, std::move(h), ec, renew_result{});
    const bool in_set = key.kind != lease_kind::mutex;
    auto decode = [in_set](const sql::result& r, renew_result& out) {
        return in_set ? sql::decode_set_renew(r, out) : sql::decode_renew(r, out);
    };
    impl_->conn->exec(in_set ? impl_->sets.renew : impl_->st.renew, {key.name, key.token, ms(ttl)},
                      detail::sql_reply<renew_result, sql::result>(impl_->ex, keep_error_text(), decode,
                                                                   detail::empty_on_error, std::move(h)));
}

void postgres_store::do_release(const lease_key& key, asio::any_completion_handler<bool_signature> h)
{
    if (auto ec = detail::key_refusal(sql::check_name(key.name), sql::check_name(key.token)))
        return post_completion(impl_->ex, std::move(h), ec, false);
    if (key.kind != lease_kind::mutex)
        return release_in_set(key.name, key.token, false, std::move(h));
    asio::co_spawn(
        impl_->ex,
        [self = impl_, name = key.name, token = key.token, keep = keep_error_text(),
         h = detail::shared_handler(std::move(h))]() -> asio::awaitable<void> {
            // Twice at most: a withdrawn token that a concurrent release handed the name to
            // holds it now, and the second run (a new snapshot) hands it on or frees it.
            sql::release_outcome out;
            error_code ec;
            for (int run = 0; run < 2; ++run) {
                std::vector<std::string> params{name, token};
                auto [rec, res] = co_await exec(*self->conn, self->st.release, std::move(params));
                ec = rec;
                if (!ec && !sql::decode_release(res, out))
                    ec = error::protocol_error;
                if (ec && !res.message.empty())
                    keep(res.message);
                if (ec || !out.raced)
                    break;
            }
            detail::post_shared(self->ex, h, ec, !ec && out.held);
        },
        asio::detached);
}

namespace {

// A set's release on `self`'s connection; `force` as core/kind_text.hpp's force_letter.
template <class Keep>
void set_release(const std::shared_ptr<postgres_store::impl>& self, Keep keep, const std::string& name,
                 const std::string& token, char force, asio::any_completion_handler<store::bool_signature> h)
{
    auto decode = [](const sql::result& r, bool& out) { return sql::decode_set_release(r, out); };
    auto held = [](error_code ec, bool out) { return !ec && out; };
    // One side goes to a function of its own; a release or a full override to the first.
    bool side = force == 'r' || force == 'w';
    self->conn->exec(side ? self->sets.release_side : self->sets.release,
                     side ? std::vector<std::string>{name, std::string(1, force)}
                          : std::vector<std::string>{name, token, force == '1' ? "t" : "f"},
                     detail::sql_reply<bool, sql::result>(self->ex, std::move(keep), decode, held, std::move(h)));
}

}  // namespace

void postgres_store::release_in_set(const std::string& name, const std::string& token, bool force,
                                    asio::any_completion_handler<bool_signature> h)
{
    set_release(impl_, keep_error_text(), name, token, force ? '1' : '0', std::move(h));
}

// The operator's override: a mutex's lease (never a set's marker row), else every lease of
// the name's set; one side of a read-write lock goes to the set's release alone.
void postgres_store::do_force_release(const std::string& name, lease_kind side,
                                      asio::any_completion_handler<bool_signature> h)
{
    if (auto ec = sql::check_name(name))
        return post_completion(impl_->ex, std::move(h), ec, false);
    if (detail::one_side(side))
        return set_release(impl_, keep_error_text(), name, {}, detail::force_letter(side), std::move(h));
    impl_->conn->exec(
        impl_->st.force_release, {name},
        [self = impl_, keep = keep_error_text(), name, h = std::move(h)](error_code ec, sql::result res) mutable {
            sql::release_outcome out;
            if (!ec && !sql::decode_release(res, out))
                ec = error::protocol_error;
            if (ec && !res.message.empty())
                keep(res.message);
            // Only a set's name goes on to the set's release (a free name does not).
            if (!ec && out.raced)
                return set_release(self, keep, name, {}, '1', std::move(h));
            post_completion(self->ex, std::move(h), ec, !ec && out.held);
        });
}

void postgres_store::do_status(const std::string& name, asio::any_completion_handler<status_signature> h)
{
    if (auto ec = sql::check_name(name))
        return post_completion(impl_->ex, std::move(h), ec, lock_status{});
    auto decode = [](const sql::result& r, lock_status& out) { return sql::decode_status(r, out); };
    auto hp = std::make_shared<asio::any_completion_handler<status_signature>>(std::move(h));
    // A set's name: its marker row in the lease table says so, and the set's status follows.
    impl_->conn->exec(impl_->st.status, {name},
                      detail::sql_reply<lock_status, sql::result>(
                          impl_->ex, keep_error_text(), decode, detail::status_keyed(impl_->cfg.table, name),
                          [self = impl_, keep = keep_error_text(), name, hp](error_code ec, lock_status st) {
                              if (ec || !st.held || st.holder != sql::set_marker)
                                  return std::move(*hp)(ec, std::move(st));
                              self->conn->exec(self->sets.status, {name},
                                               detail::sql_reply<lock_status, sql::result>(
                                                   self->ex, keep,
                                                   [](const sql::result& r, lock_status& out) {
                                                       return sql::decode_set_status(r, out);
                                                   },
                                                   detail::status_keyed(self->cfg.table, name), std::move(*hp)));
                          }));
}

void postgres_store::do_proclaim(const lease_key& key, const std::string& value,
                                 asio::any_completion_handler<proclaim_signature> h)
{
    if (auto ec = detail::key_refusal(sql::check_name(key.name), sql::check_name(key.token));
        ec || (ec = value.find('\0') != std::string::npos ? error_code(error::invalid_option) : error_code()))
        return post_completion(impl_->ex, std::move(h), ec, false);
    auto decode = [](const sql::result& r, bool& out) { return sql::decode_proclaim(r, out); };
    auto written = [](error_code ec, bool out) { return !ec && out; };
    impl_->conn->exec(
        impl_->st.proclaim, {key.name, key.token, value},
        detail::sql_reply<bool, sql::result>(impl_->ex, keep_error_text(), decode, written, std::move(h)));
}

void postgres_store::do_leader(const std::string& name, asio::any_completion_handler<leader_signature> h)
{
    if (auto ec = sql::check_name(name))
        return post_completion(impl_->ex, std::move(h), ec, lock_status{});
    auto decode = [](const sql::result& r, lock_status& out) { return sql::decode_leader(r, out); };
    impl_->conn->exec(impl_->st.leader, {name},
                      detail::sql_reply<lock_status, sql::result>(impl_->ex, keep_error_text(), decode,
                                                                  detail::status_keyed(impl_->cfg.table, name),
                                                                  std::move(h)));
}

void postgres_store::do_count_down(const std::string& name, const std::string& member, std::uint64_t count,
                                   std::chrono::milliseconds ttl, asio::any_completion_handler<count_down_signature> h)
{
    auto ec = detail::count_down_refusal(count, member);
    if (!ec && !detail::sql_valid_ttl(ttl))
        ec = error::invalid_lease;
    if (!ec)
        ec = detail::key_refusal(sql::check_name(name), sql::check_name(member));
    if (ec)
        return post_completion(impl_->ex, std::move(h), ec, std::uint64_t{0});
    impl_->conn->exec(impl_->st.count_down, {name, member, std::to_string(count), ms(ttl)},
                      [ex = impl_->ex, keep = keep_error_text(), name, count,
                       h = std::move(h)](error_code ec, sql::result res) mutable {
                          std::uint64_t remaining = 0;
                          if (!ec)
                              ec = sql::decode_count_down(res, remaining);
                          if (ec == error::count_mismatch)
                              keep("postgres: the latch " + name + " has a count of " + std::to_string(remaining) +
                                   ", not " + std::to_string(count));
                          else if (ec && !res.message.empty())
                              keep(res.message);
                          post_completion(ex, std::move(h), ec, ec ? std::uint64_t{0} : remaining);
                      });
}

void postgres_store::do_latch_state(const std::string& name, asio::any_completion_handler<latch_state_signature> h)
{
    if (auto ec = sql::check_name(name))
        return post_completion(impl_->ex, std::move(h), ec, latch_state{});
    auto decode = [](const sql::result& r, latch_state& out) { return sql::decode_latch_state(r, out); };
    auto state = [](error_code ec, const latch_state& out) { return ec ? latch_state{} : out; };
    impl_->conn->exec(
        impl_->st.latch_state, {name},
        detail::sql_reply<latch_state, sql::result>(impl_->ex, keep_error_text(), decode, state, std::move(h)));
}

store::watch_id postgres_store::watch(const std::string& name, const std::string& token, watch_callback cb)
{
    auto id = impl_->watches.add(name, token, std::move(cb)).id;
    if (impl_->listening)
        impl_->watches.name_ready(name);  // LISTEN hears every name: this one too, at once
    impl_->start_listener();
    return id;
}

void postgres_store::unwatch(watch_id id)
{
    impl_->watches.remove(id);
}

}  // namespace dlock
