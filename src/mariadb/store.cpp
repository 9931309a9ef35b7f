// SPDX-License-Identifier: BSL-1.0
#include <dlock/error.hpp>
#include <dlock/mariadb/store.hpp>

#include "common/lease_checks.hpp"
#include "common/post_completion.hpp"
#include "common/sql_reply.hpp"
#include "common/sql_store_kit.hpp"
#include "common/watch_table.hpp"
#include "mariadb/connection.hpp"
#include "mariadb/sql.hpp"
#include "mariadb/wait_pool.hpp"

#include <map>
#include <random>
#include <utility>

namespace dlock {

namespace asio = boost::asio;
using boost::system::error_code;
using detail::post_completion;
using conn_t = mariadb::detail::connection;
namespace sql = mariadb::sql;
using std::chrono::milliseconds;

struct mariadb_store::impl : std::enable_shared_from_this<impl> {
    explicit impl(asio::any_io_executor e) : ex(e), watches(e) {}

    struct slot {
        std::unique_ptr<conn_t> conn;
        std::string name;  // waited for
    };

    asio::any_io_executor ex;
    mariadb::config cfg;
    std::unique_ptr<conn_t> conn;
    std::string bad_config;  // why the config was refused (empty: it was not)
    // The GET_LOCK waits: the machine decides (wait_pool.hpp), `slots` are its connections.
    mariadb::detail::wait_pool pool{0};
    std::vector<slot> slots;
    detail::watch_table watches;  // every watcher untokened: GET_LOCK waits for the name, not a token
    std::minstd_rand rng{std::random_device{}()};

    // Someone watches `name` and the store is open.
    bool watched(const std::string& name) const { return watches.name_live(name); }

    // A refused attempt on `name`. Unless a wait will wake the waiters, they sleep the
    // holder's lease, made a little longer at random so that they do not all come back at once.
    void observe(const std::string& name, const mariadb::sql::holder_info& h, acquire_result& out)
    {
        bool woken = pool.observe(name, h.signal, h.remaining, watched(name));
        perform();
        if (!woken && out.holder_ttl.count() > 0) {
            auto spread = std::min<milliseconds::rep>(out.holder_ttl.count() / 10 + 1, 50);
            out.holder_ttl += milliseconds(std::uniform_int_distribution<milliseconds::rep>(0, spread)(rng));
        }
    }

    void perform()
    {
        using type = mariadb::detail::pool_action::type;
        for (auto& a : std::exchange(pool.actions(), {})) {
            switch (a.t) {
            case type::open:
                slots.push_back(
                    {std::make_unique<conn_t>(
                         ex, mariadb::detail::connection_settings{cfg, mariadb::sql::session_setup(), bad_config}),
                     {}});
                break;
            case type::wait: start_wait(a.slot, a.name, a.timeout); break;
            case type::abort: slots[a.slot].conn->abort(); break;
            case type::released: watches.tell_name(a.name, watch_event::released); break;
            case type::resync: watches.tell_name(a.name, watch_event::resync); break;
            }
        }
    }

    void start_wait(std::size_t k, const std::string& name, milliseconds timeout)
    {
        slots[k].name = name;
        auto request_bound = timeout + (cfg.request_timeout.count() > 0 ? cfg.request_timeout : milliseconds(5000));
        slots[k].conn->exec(mariadb::sql::wait(cfg.table, name, timeout), request_bound,
                            [weak = weak_from_this(), k](error_code ec, mariadb::sql::result res) {
                                if (auto self = weak.lock())
                                    self->on_wait_done(k, ec, res);
                            });
    }

    void on_wait_done(std::size_t k, error_code ec, const mariadb::sql::result& res)
    {
        if (ec == error::closed)
            return;
        bool released = false;
        auto end = ec || !mariadb::sql::decode_wait(res, released) ? mariadb::detail::wait_end::failed
                   : released                                      ? mariadb::detail::wait_end::released
                                                                   : mariadb::detail::wait_end::timed_out;
        pool.on_done(k, end, watched(slots[k].name));
        perform();
    }
};

mariadb_store::mariadb_store(asio::any_io_executor ex, mariadb::config cfg) : impl_(std::make_shared<impl>(ex))
{
    impl_->bad_config = detail::refuse_table(cfg.table, mariadb::check_table(cfg.table), "mariadb_store");
    impl_->cfg = std::move(cfg);
    impl_->pool = mariadb::detail::wait_pool(impl_->cfg.wait_connections);
    mariadb::detail::connection_settings cs{impl_->cfg, mariadb::sql::session_setup() + ";\n" +
                                                            mariadb::sql::schema_setup(impl_->cfg.table)};
    cs.refused = impl_->bad_config;
    impl_->conn = std::make_unique<conn_t>(ex, std::move(cs));
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
    t.direct_handoff = false;
    t.release_notifications = impl_->cfg.wait_connections > 0;
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
    impl_->watches.close();
    impl_->pool.close();
}


// Connects and runs the setup (the table and sequence if missing): checks credentials,
// the database and the privileges once.
void mariadb_store::do_connect(asio::any_completion_handler<connect_signature> h)
{
    impl_->conn->exec("SELECT 1", milliseconds(0),
                      detail::connect_reply<sql::result>(impl_->ex, keep_error_text(), std::move(h)));
}

void mariadb_store::do_try_acquire(const lease_request& req, asio::any_completion_handler<acquire_signature> h)
{
    if (auto ec = detail::lease_refusal(req.kind, detail::sql_valid_ttl(req.ttl));
        ec || (ec = detail::key_refusal(sql::check_name(req.name), sql::check_token(req.token))))
        return post_completion(impl_->ex, std::move(h), ec, acquire_result{});
    // A refused attempt tells the GET_LOCK wait what it saw of the holder.
    auto decode = [weak = std::weak_ptr<impl>(impl_), name = req.name, ttl = req.ttl](const sql::result& r,
                                                                                      acquire_result& out) {
        sql::holder_info holder;
        if (!sql::decode_acquire(r, ttl, out, holder))
            return false;
        if (auto self = weak.lock(); self && !out.acquired)
            self->observe(name, holder, out);
        return true;
    };
    impl_->conn->exec(sql::acquire(impl_->cfg.table, req.name, req.token, req.ttl), milliseconds(0),
                      detail::sql_reply<acquire_result, sql::result>(impl_->ex, keep_error_text(), decode,
                                                                     detail::empty_on_error, std::move(h)));
}

void mariadb_store::do_renew(const lease_key& key, milliseconds ttl, asio::any_completion_handler<renew_signature> h)
{
    if (auto ec = detail::lease_refusal(lease_kind::mutex, detail::sql_valid_ttl(ttl));
        ec || (ec = detail::key_refusal(sql::check_name(key.name), sql::check_token(key.token))))
        return post_completion(impl_->ex, std::move(h), ec, renew_result{});
    auto decode = [](const sql::result& r, renew_result& out) { return sql::decode_renew(r, out); };
    impl_->conn->exec(sql::renew(impl_->cfg.table, key.name, key.token, ttl), milliseconds(0),
                      detail::sql_reply<renew_result, sql::result>(impl_->ex, keep_error_text(), decode,
                                                                   detail::empty_on_error, std::move(h)));
}

void mariadb_store::do_release(const lease_key& key, asio::any_completion_handler<bool_signature> h)
{
    if (auto ec = detail::key_refusal(sql::check_name(key.name), sql::check_token(key.token)))
        return post_completion(impl_->ex, std::move(h), ec, false);
    auto decode = [](const sql::result& r, bool& out) { return sql::decode_release(r, out); };
    auto held = [](error_code ec, bool out) { return !ec && out; };
    impl_->conn->exec(sql::release(impl_->cfg.table, key.name, key.token), milliseconds(0),
                      detail::sql_reply<bool, sql::result>(impl_->ex, keep_error_text(), decode, held, std::move(h)));
}

void mariadb_store::do_force_release(const std::string& name, asio::any_completion_handler<bool_signature> h)
{
    if (auto ec = sql::check_name(name))
        return post_completion(impl_->ex, std::move(h), ec, false);
    auto decode = [](const sql::result& r, bool& out) { return sql::decode_release(r, out); };
    auto held = [](error_code ec, bool out) { return !ec && out; };
    impl_->conn->exec(sql::force_release(impl_->cfg.table, name), milliseconds(0),
                      detail::sql_reply<bool, sql::result>(impl_->ex, keep_error_text(), decode, held, std::move(h)));
}

void mariadb_store::do_status(const std::string& name, asio::any_completion_handler<status_signature> h)
{
    if (auto ec = sql::check_name(name))
        return post_completion(impl_->ex, std::move(h), ec, lock_status{});
    auto decode = [](const sql::result& r, lock_status& out) { return sql::decode_status(r, out); };
    impl_->conn->exec(sql::status(impl_->cfg.table, name), milliseconds(0),
                      detail::sql_reply<lock_status, sql::result>(impl_->ex, keep_error_text(), decode,
                                                                  detail::status_keyed(impl_->cfg.table, name),
                                                                  std::move(h)));
}


store::watch_id mariadb_store::watch(const std::string& name, const std::string&, watch_callback cb)
{
    // A named lock is state: a wait started after the next refused attempt sees any release after it.
    return impl_->watches.add_live(name, std::move(cb)).id;
}

void mariadb_store::unwatch(watch_id id)
{
    auto r = impl_->watches.remove(id);
    if (!r.last)
        return;
    impl_->pool.on_unwatched(r.name);  // a wait for it ends now: its connection is free for others
    impl_->perform();
}

}  // namespace dlock
