// SPDX-License-Identifier: BSL-1.0
// mariadb_store's read-write locks, semaphores, elections and latches: each operation one
// compound statement (src/mariadb/set_sql.cpp, election_latch_sql.cpp) on the main connection.
#include <dlock/error.hpp>
#include <dlock/mariadb/store.hpp>

#include "common/lease_checks.hpp"
#include "common/post_completion.hpp"
#include "common/sql_reply.hpp"
#include "common/sql_store_kit.hpp"
#include "core/kind_text.hpp"
#include "mariadb/election_latch_sql.hpp"
#include "mariadb/set_sql.hpp"
#include "mariadb/store_impl.hpp"

#include <limits>

namespace dlock {

namespace asio = boost::asio;
using boost::system::error_code;
using detail::post_completion;
namespace sql = mariadb::sql;
using std::chrono::milliseconds;

// A read-write lock's or a semaphore's lease, in the name's turn.
void mariadb_store::acquire_in_set(const lease_request& req, asio::any_completion_handler<acquire_signature> h)
{
    if (req.kind == lease_kind::permit &&
        (req.capacity == 0 || req.capacity > static_cast<unsigned>(std::numeric_limits<int>::max())))
        return post_completion(impl_->ex, std::move(h), error_code(error::invalid_option), acquire_result{});
    const std::uint64_t listener = req.queue ? impl_->listener(req.name) : 0;
    const unsigned permits = req.kind == lease_kind::permit ? req.capacity : 0;
    impl_->exec(sql::set_acquire(impl_->cfg.table, req.name, req.token, req.ttl, listener,
                                 detail::set_kind_letter(req.kind), permits),
                [ex = impl_->ex, keep = keep_error_text(), ttl = req.ttl, h = std::move(h)](error_code ec,
                                                                                            sql::result res) mutable {
                    acquire_result out;
                    long long what = 0;
                    if (!ec)
                        ec = sql::decode_set_acquire(res, ttl, out, what);
                    if (ec == error::kind_mismatch)
                        keep("mariadb: the name is " + detail::kind_name_of_code(what));
                    else if (ec && !res.message.empty())
                        keep(res.message);
                    post_completion(ex, std::move(h), ec, ec ? acquire_result{} : out);
                });
}

void mariadb_store::impl::release_set(mariadb_store::error_text_keeper keep, const std::string& name,
                                      const std::string& token, char force,
                                      asio::any_completion_handler<store::bool_signature> h)
{
    auto decode = [](const sql::result& r, bool& out) { return sql::decode_set_release(r, out); };
    auto held = [](error_code ec, bool out) { return !ec && out; };
    exec(sql::set_release(cfg.table, name, token, force),
         detail::sql_reply<bool, sql::result>(ex, std::move(keep), decode, held, std::move(h)));
}

void mariadb_store::release_in_set(const std::string& name, const std::string& token, bool force,
                                   asio::any_completion_handler<bool_signature> h)
{
    impl_->release_set(keep_error_text(), name, token, force ? '1' : '0', std::move(h));
}

void mariadb_store::do_proclaim(const lease_key& key, const std::string& value,
                                asio::any_completion_handler<proclaim_signature> h)
{
    if (auto ec = detail::key_refusal(sql::check_name(key.name), sql::check_token(key.token)))
        return post_completion(impl_->ex, std::move(h), ec, false);
    auto decode = [](const sql::result& r, bool& out) { return sql::decode_proclaim(r, out); };
    auto written = [](error_code ec, bool out) { return !ec && out; };
    impl_->exec(sql::proclaim(impl_->cfg.table, key.name, key.token, value),
                detail::sql_reply<bool, sql::result>(impl_->ex, keep_error_text(), decode, written, std::move(h)));
}

void mariadb_store::do_leader(const std::string& name, asio::any_completion_handler<leader_signature> h)
{
    if (auto ec = sql::check_name(name))
        return post_completion(impl_->ex, std::move(h), ec, lock_status{});
    auto decode = [](const sql::result& r, lock_status& out) { return sql::decode_leader(r, out); };
    impl_->exec(sql::leader(impl_->cfg.table, name),
                detail::sql_reply<lock_status, sql::result>(
                    impl_->ex, keep_error_text(), decode, detail::status_keyed(impl_->cfg.table, name), std::move(h)));
}

void mariadb_store::do_count_down(const std::string& name, const std::string& member, std::uint64_t count,
                                  milliseconds ttl, asio::any_completion_handler<count_down_signature> h)
{
    auto ec = detail::count_down_refusal(count, member);
    if (!ec && !detail::sql_valid_ttl(ttl))
        ec = error::invalid_lease;
    if (!ec)
        ec = detail::key_refusal(sql::check_name(name), sql::check_name(member));
    if (ec)
        return post_completion(impl_->ex, std::move(h), ec, std::uint64_t{0});
    impl_->exec(sql::count_down(impl_->cfg.table, name, member, count, ttl),
                [ex = impl_->ex, keep = keep_error_text(), name, count, h = std::move(h)](error_code ec,
                                                                                          sql::result res) mutable {
                    std::uint64_t remaining = 0;
                    if (!ec)
                        ec = sql::decode_count_down(res, remaining);
                    if (ec == error::count_mismatch)
                        keep("mariadb: the latch " + name + " has a count of " + std::to_string(remaining) + ", not " +
                             std::to_string(count));
                    else if (ec && !res.message.empty())
                        keep(res.message);
                    post_completion(ex, std::move(h), ec, ec ? std::uint64_t{0} : remaining);
                });
}

void mariadb_store::do_latch_state(const std::string& name, asio::any_completion_handler<latch_state_signature> h)
{
    if (auto ec = sql::check_name(name))
        return post_completion(impl_->ex, std::move(h), ec, latch_state{});
    auto decode = [](const sql::result& r, latch_state& out) { return sql::decode_latch_state(r, out); };
    auto state = [](error_code ec, const latch_state& out) { return ec ? latch_state{} : out; };
    impl_->exec(sql::latch_read(impl_->cfg.table, name),
                detail::sql_reply<latch_state, sql::result>(impl_->ex, keep_error_text(), decode, state, std::move(h)));
}

}  // namespace dlock
