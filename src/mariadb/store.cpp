// SPDX-License-Identifier: BSL-1.0
#include <dlock/error.hpp>
#include <dlock/mariadb/store.hpp>

#include "common/lease_checks.hpp"
#include "common/post_completion.hpp"
#include "common/sql_reply.hpp"
#include "common/sql_store_kit.hpp"
#include "core/kind_text.hpp"
#include "mariadb/bell_sql.hpp"
#include "mariadb/set_sql.hpp"
#include "mariadb/store_impl.hpp"

#include <utility>

namespace dlock {

namespace asio = boost::asio;
using boost::system::error_code;
using detail::post_completion;
namespace sql = mariadb::sql;
using std::chrono::milliseconds;

namespace {

// The sleeper's SLEEP: rings end it early; its end only starts the next one.
constexpr milliseconds sleep_bound{30'000};

}  // namespace

// A refused attempt on `name`. Unless a wait will wake the waiters, they sleep the
// holder's lease, made a little longer at random so that they do not all come back at once.
void mariadb_store::impl::observe(const std::string& name, const sql::holder_info& h, acquire_result& out)
{
    bool woken = pool.observe(name, h.signal, h.remaining, watched(name)) || bell.enrolled(name);
    perform();
    if (!woken && out.holder_ttl.count() > 0) {
        auto spread = std::min<milliseconds::rep>(out.holder_ttl.count() / 10 + 1, 50);
        out.holder_ttl += milliseconds(std::uniform_int_distribution<milliseconds::rep>(0, spread)(rng));
    }
}

void mariadb_store::impl::perform()
{
    using type = mariadb::detail::pool_action::type;
    for (auto& a : std::exchange(pool.actions(), {})) {
        switch (a.t) {
        case type::open:
            slots.push_back({std::make_unique<conn_t>(
                                 ex, mariadb::detail::connection_settings{cfg, sql::session_setup(), bad_config}),
                             {}});
            break;
        case type::wait: start_wait(a.slot, a.name, a.timeout); break;
        case type::abort: slots[a.slot].conn->abort(); break;
        case type::released: watches.tell_name(a.name, watch_event::released); break;
        case type::resync: watches.tell_name(a.name, watch_event::resync); break;
        }
    }
}

void mariadb_store::impl::start_wait(std::size_t k, const std::string& name, milliseconds timeout)
{
    slots[k].name = name;
    auto request_bound = timeout + (cfg.request_timeout.count() > 0 ? cfg.request_timeout : milliseconds(5000));
    slots[k].conn->exec(sql::wait(cfg.table, name, timeout), request_bound,
                        [weak = weak_from_this(), k](error_code ec, sql::result res) {
                            if (auto self = weak.lock())
                                self->on_wait_done(k, ec, res);
                        });
}

void mariadb_store::impl::on_wait_done(std::size_t k, error_code ec, const sql::result& res)
{
    if (ec == error::closed)
        return;
    bool released = false;
    auto end = ec || !sql::decode_wait(res, released) ? mariadb::detail::wait_end::failed
               : released                             ? mariadb::detail::wait_end::released
                                                      : mariadb::detail::wait_end::timed_out;
    pool.on_done(k, end, watched(slots[k].name));
    perform();
}

void mariadb_store::impl::perform_bell()
{
    using type = mariadb::detail::bell_action::type;
    for (auto& a : std::exchange(bell.actions(), {})) {
        switch (a.t) {
        case type::sleep:
            if (a.delay.count() == 0) {
                start_sleep(a.baseline);
                break;
            }
            bell_timer.expires_after(a.delay);
            bell_timer.async_wait([weak = weak_from_this(), b = a.baseline](error_code ec) {
                if (auto self = weak.lock(); self && !ec)
                    self->start_sleep(b);
            });
            break;
        case type::enrol:
            exec(sql::bell_enrol(cfg.table, a.conn, a.names),
                 [weak = weak_from_this(), names = a.names, c = a.conn](error_code ec, sql::result) {
                     if (auto self = weak.lock(); self && ec != error::closed) {
                         self->bell.on_enrolled(names, c, !ec);
                         self->perform_bell();
                     }
                 });
            break;
        case type::leave: exec(sql::bell_leave(cfg.table, a.conn, a.names), [](error_code, sql::result) {}); break;
        case type::ready:
            for (const auto& n : a.names)
                watches.name_ready(n);
            break;
        case type::released:
            for (const auto& n : a.names)
                tell_rung(n);
            break;
        case type::resync:
            for (const auto& n : a.names)
                watches.tell_name(n, watch_event::resync);
            break;
        }
    }
}

// A rung name: its new mutex holder, if a token queued here, is told its grant (with the
// lease it asked for, which the hand-off set); every watcher hears the ring.
void mariadb_store::impl::tell_rung(const std::string& name)
{
    if (auto h = holders.find(name); h != holders.end() && h->second.owner) {
        auto q = queued.find({name, *h->second.owner});
        if (q != queued.end()) {
            watches.tell(name, q->first.second, watch_event::granted, grant_notice{h->second.fence, q->second, {}});
            queued.erase(q);
        }
    }
    watches.tell_name(name, watch_event::released);
}

void mariadb_store::impl::exec(std::string text, asio::any_completion_handler<conn_t::exec_signature> h)
{
    conn->exec(std::move(text), milliseconds(0),
               [weak = weak_from_this(), h = std::move(h)](error_code ec, sql::result res) mutable {
                   auto rung = sql::take_rings(res);
                   auto self = weak.lock();
                   if (!self || rung.empty())
                       return std::move(h)(ec, std::move(res));
                   // The operation completes once its rings are out: a process that closes its
                   // store right after (the tool) still wakes the waiters.
                   auto hp = std::make_shared<asio::any_completion_handler<conn_t::exec_signature>>(std::move(h));
                   self->wake(rung, [hp, ec, res = std::move(res)]() mutable { std::move (*hp)(ec, std::move(res)); });
               });
}

void mariadb_store::impl::wake(const std::vector<std::uint64_t>& conns, std::function<void()> then)
{
    if (closed)
        return then();  // no new connection once closed
    if (!ringer)
        ringer =
            std::make_unique<conn_t>(ex, mariadb::detail::connection_settings{cfg, sql::session_setup(), bad_config});
    ringer->exec(sql::kill_sleepers(cfg.table, conns), milliseconds(0),
                 [then = std::move(then)](error_code, sql::result) { then(); });
}

// Without a bell table nothing rings: every watcher re-checks once a second (a latch's waiter
// and an election's observer have no holder's lease to sleep on). Documented as degraded.
void mariadb_store::impl::poll_without_bell()
{
    if (closed)
        return;
    bell_timer.expires_after(std::chrono::seconds(1));
    bell_timer.async_wait([weak = weak_from_this()](error_code ec) {
        auto self = weak.lock();
        if (!self || ec || self->closed)
            return;
        for (const auto& n : self->watches.names())
            self->watches.tell_name(n, watch_event::resync);
        self->poll_without_bell();
    });
}

mariadb_store::impl::conn_t& mariadb_store::impl::open_sleeper()
{
    if (!sleeper)
        sleeper =
            std::make_unique<conn_t>(ex, mariadb::detail::connection_settings{cfg, sql::session_setup(), bad_config});
    return *sleeper;
}

void mariadb_store::impl::start_sleep(std::pair<std::uint64_t, std::uint64_t> baseline)
{
    auto bound = sleep_bound + (cfg.request_timeout.count() > 0 ? cfg.request_timeout : milliseconds(5000));
    open_sleeper().exec(sql::bell_sleep(cfg.table, baseline, sleep_bound), bound,
                        [weak = weak_from_this()](error_code ec, sql::result res) {
                            auto self = weak.lock();
                            if (!self || ec == error::closed)
                                return;
                            mariadb::detail::bell_reading r;
                            bool shaped = sql::decode_bell(res, r);
                            // No bell table, or not for this user: no bells at all (waiters sleep their bound).
                            if (ec && (res.errnum == 1146 || res.errnum == 1142 || res.errnum == 1044)) {
                                self->bell.on_unavailable();
                                self->perform_bell();
                                return self->poll_without_bell();
                            }
                            // A ring's KILL ends the SLEEP with "interrupted": that is its job.
                            bool failed = !shaped || (ec && res.errnum != 1317);
                            for (const auto& row : r.rows)
                                if (self->bell.enrolled(row.name))  // not one unwatched meanwhile
                                    self->holders[row.name] = row;
                            self->bell.on_sleep_done(shaped ? r : mariadb::detail::bell_reading{}, failed);
                            self->perform_bell();
                        });
}

mariadb_store::mariadb_store(asio::any_io_executor ex, mariadb::config cfg) : impl_(std::make_shared<impl>(ex))
{
    impl_->bad_config = detail::refuse_table(cfg.table, mariadb::check_table(cfg.table), "mariadb_store");
    impl_->cfg = std::move(cfg);
    impl_->pool = mariadb::detail::wait_pool(impl_->cfg.wait_connections);
    mariadb::detail::connection_settings cs{impl_->cfg,
                                            sql::session_setup() + ";\n" + sql::schema_setup(impl_->cfg.table)};
    cs.refused = impl_->bad_config;
    impl_->conn = std::make_unique<impl::conn_t>(ex, std::move(cs));
}

mariadb_store::~mariadb_store()
{
    close();
}

asio::any_io_executor mariadb_store::get_executor() const
{
    return impl_->ex;
}

const mariadb::config& mariadb_store::config() const noexcept
{
    return impl_->cfg;
}

store_traits mariadb_store::traits() const noexcept
{
    auto t = detail::sql_traits();
    t.kinds |= static_cast<unsigned>(lease_kind::read) | static_cast<unsigned>(lease_kind::write) |
               static_cast<unsigned>(lease_kind::permit) | static_cast<unsigned>(lease_kind::leader);
    t.direct_handoff = true;
    t.release_notifications = true;
    return t;
}

std::string mariadb_store::describe() const
{
    return "mariadb " + mariadb::to_url(impl_->cfg) + " table=" + impl_->cfg.table;
}

void mariadb_store::close()
{
    impl_->conn->close();
    for (auto& s : impl_->slots)
        s.conn->close();
    if (impl_->sleeper)
        impl_->sleeper->close();
    if (impl_->ringer)
        impl_->ringer->close();
    impl_->closed = true;
    impl_->bell_timer.cancel();
    impl_->bell.close();
    impl_->watches.close();
    impl_->pool.close();
}


// Connects and runs the setup (the tables and sequence if missing): checks credentials,
// the database and the privileges once.
void mariadb_store::do_connect(asio::any_completion_handler<connect_signature> h)
{
    impl_->exec("SELECT 1", detail::connect_reply<sql::result>(impl_->ex, keep_error_text(), std::move(h)));
}

void mariadb_store::do_try_acquire(const lease_request& req, asio::any_completion_handler<acquire_signature> h)
{
    if (auto ec = detail::lease_refusal(lease_kind::mutex, detail::sql_valid_ttl(req.ttl));
        ec || (ec = detail::key_refusal(sql::check_name(req.name), sql::check_token(req.token))))
        return post_completion(impl_->ex, std::move(h), ec, acquire_result{});
    if (req.kind != lease_kind::mutex && req.kind != lease_kind::leader)
        return acquire_in_set(req, std::move(h));
    // A refused attempt tells the GET_LOCK wait what it saw of the holder.
    auto decode = [weak = std::weak_ptr<impl>(impl_), name = req.name,
                   ttl = req.ttl](const sql::result& r, acquire_result& out, std::optional<std::uint64_t>& set) {
        sql::holder_info holder;
        if (!sql::decode_acquire(r, ttl, out, holder, set))
            return false;
        if (auto self = weak.lock(); self && !out.acquired && !set)
            self->observe(name, holder, out);
        return true;
    };
    const std::uint64_t listener = req.queue ? impl_->listener(req.name) : 0;
    impl_->exec(sql::acquire(impl_->cfg.table, req.name, req.token, req.ttl, req.kind == lease_kind::leader, listener),
                [ex = impl_->ex, keep = keep_error_text(), decode, weak = std::weak_ptr<impl>(impl_),
                 key = std::pair{req.name, req.token}, ttl = req.ttl, listener,
                 h = std::move(h)](error_code ec, sql::result res) mutable {
                    acquire_result out;
                    std::optional<std::uint64_t> set;
                    if (!ec && !decode(res, out, set))
                        ec = error::protocol_error;
                    if (auto self = weak.lock(); self && !ec) {
                        // Only a token still waiting: one withdrawn meanwhile is not kept.
                        if (out.acquired || !listener || !self->watches.watched(key.first, key.second))
                            self->queued.erase(key);
                        else
                            self->queued[key] = ttl;
                    }
                    if (!ec && set) {
                        ec = error::kind_mismatch;
                        keep("mariadb: the name is " + detail::kind_name_of_code(static_cast<long long>(*set)) +
                             ", not a mutex");
                    } else if (ec && !res.message.empty()) {
                        keep(res.message);
                    }
                    post_completion(ex, std::move(h), ec, ec ? acquire_result{} : out);
                });
}

void mariadb_store::do_renew(const lease_key& key, milliseconds ttl, asio::any_completion_handler<renew_signature> h)
{
    if (auto ec = detail::lease_refusal(lease_kind::mutex, detail::sql_valid_ttl(ttl));
        ec || (ec = detail::key_refusal(sql::check_name(key.name), sql::check_token(key.token))))
        return post_completion(impl_->ex, std::move(h), ec, renew_result{});
    const bool in_set = key.kind != lease_kind::mutex && key.kind != lease_kind::leader;
    auto decode = [in_set](const sql::result& r, renew_result& out) {
        return in_set ? sql::decode_set_renew(r, out) : sql::decode_renew(r, out);
    };
    impl_->exec(in_set ? sql::set_renew(impl_->cfg.table, key.name, key.token, ttl)
                       : sql::renew(impl_->cfg.table, key.name, key.token, ttl),
                detail::sql_reply<renew_result, sql::result>(impl_->ex, keep_error_text(), decode,
                                                             detail::empty_on_error, std::move(h)));
}

void mariadb_store::do_release(const lease_key& key, asio::any_completion_handler<bool_signature> h)
{
    if (auto ec = detail::key_refusal(sql::check_name(key.name), sql::check_token(key.token)))
        return post_completion(impl_->ex, std::move(h), ec, false);
    if (key.kind != lease_kind::mutex && key.kind != lease_kind::leader)
        return release_in_set(key.name, key.token, false, std::move(h));
    impl_->queued.erase({key.name, key.token});  // withdrawn, or holding no more
    auto decode = [](const sql::result& r, bool& out) { return sql::decode_release(r, out); };
    auto held = [](error_code ec, bool out) { return !ec && out; };
    impl_->exec(sql::release(impl_->cfg.table, key.name, key.token),
                detail::sql_reply<bool, sql::result>(impl_->ex, keep_error_text(), decode, held, std::move(h)));
}

// The operator's override: a mutex's lease (never a set's marker row), else every lease of
// the name's set; one side of a read-write lock goes to the set's release alone.
void mariadb_store::do_force_release(const std::string& name, lease_kind side,
                                     asio::any_completion_handler<bool_signature> h)
{
    if (auto ec = sql::check_name(name))
        return post_completion(impl_->ex, std::move(h), ec, false);
    if (detail::one_side(side))
        return impl_->release_set(keep_error_text(), name, {}, detail::force_letter(side), std::move(h));
    impl_->exec(sql::force_release(impl_->cfg.table, name), [self = impl_, keep = keep_error_text(), name,
                                                             h = std::move(h)](error_code ec, sql::result res) mutable {
        bool held = false, marker = false;
        if (!ec && !sql::decode_force_release(res, held, marker))
            ec = error::protocol_error;
        if (ec && !res.message.empty())
            keep(res.message);
        if (!ec && marker)
            return self->release_set(keep, name, {}, '1', std::move(h));
        post_completion(self->ex, std::move(h), ec, !ec && held);
    });
}

void mariadb_store::do_status(const std::string& name, asio::any_completion_handler<status_signature> h)
{
    if (auto ec = sql::check_name(name))
        return post_completion(impl_->ex, std::move(h), ec, lock_status{});
    auto decode = [](const sql::result& r, lock_status& out) { return sql::decode_status(r, out); };
    auto hp = std::make_shared<asio::any_completion_handler<status_signature>>(std::move(h));
    // A set's name: its marker row in the lease table says so, and the set's status follows.
    impl_->exec(sql::status(impl_->cfg.table, name),
                detail::sql_reply<lock_status, sql::result>(
                    impl_->ex, keep_error_text(), decode, detail::status_keyed(impl_->cfg.table, name),
                    [self = impl_, keep = keep_error_text(), name, hp](error_code ec, lock_status st) {
                        if (ec || !st.held || st.holder != sql::set_marker)
                            return std::move(*hp)(ec, std::move(st));
                        self->exec(
                            sql::set_status(self->cfg.table, name),
                            detail::sql_reply<lock_status, sql::result>(
                                self->ex, keep,
                                [](const sql::result& r, lock_status& out) { return sql::decode_set_status(r, out); },
                                detail::status_keyed(self->cfg.table, name), std::move(*hp)));
                    }));
}

store::watch_id mariadb_store::watch(const std::string& name, const std::string& token, watch_callback cb)
{
    // Ready once the name is enrolled at the doorbell (at once if it is already).
    auto id = impl_->watches.add(name, token, std::move(cb)).id;
    impl_->bell.watch(name);
    impl_->perform_bell();
    return id;
}

void mariadb_store::unwatch(watch_id id)
{
    auto r = impl_->watches.remove(id);
    if (r.kind == detail::watch_table::removed::what::none || r.kind == detail::watch_table::removed::what::session)
        return;
    if (r.kind == detail::watch_table::removed::what::untokened && r.last) {
        impl_->pool.on_unwatched(r.name);  // a wait for it ends now: its connection is free for others
        impl_->perform();
    }
    if (r.kind == detail::watch_table::removed::what::tokened && r.last)
        impl_->queued.erase({r.name, r.token});
    if (!impl_->watches.names().count(r.name)) {
        impl_->bell.unwatch(r.name);
        impl_->holders.erase(r.name);
        impl_->perform_bell();
    }
}

}  // namespace dlock
