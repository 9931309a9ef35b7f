// SPDX-License-Identifier: BSL-1.0
// Count-down latches in a layout of ours (latch_codec.hpp): a count-down reads the latch,
// then puts its member (and the latch key, if there is none yet) on the latch's own lease
// while the latch key is still the one it read; a new latch gets a new lease with the
// latch's TTL, an existing one's is kept alive once. The count-down that finds every member
// in puts the latch key again, so that the name's watchers (the waiters) hear it.
#include "common/lease_checks.hpp"
#include "core/kind_text.hpp"
#include "etcd/latch_codec.hpp"
#include "etcd/store_impl.hpp"

#include <algorithm>

namespace dlock {

namespace asio = boost::asio;
using namespace etcd::detail;
using boost::system::error_code;
using dlock::detail::post_moved;
using std::chrono::milliseconds;

namespace {

// A latch's key changed between our read and our put (created, expired) more often than this: give up.
constexpr int max_rounds = 8;

}  // namespace

std::string etcd_store::impl::kind_text_of(const key_value& first, std::string_view range)
{
    if (is_rw_key(range, first.key))
        return dlock::detail::kind_in_use_text(lease_kind::read);
    if (auto n = permits_in(first.value))
        return dlock::detail::kind_in_use_text(lease_kind::permit, *n);
    if (latch_count_in(first.value) || is_latch_key(range, first.key))
        return "dlock: the name is in use as a latch";
    return dlock::detail::kind_in_use_text(lease_kind::mutex);
}

bool etcd_store::impl::is_lock_key(const key_value& first, std::string_view range)
{
    return !is_rw_key(range, first.key) && !is_latch_key(range, first.key) && !permits_in(first.value) &&
           !latch_count_in(first.value);
}

void etcd_store::impl::count_down_round(const latch_op_ptr& op)
{
    if (++op->rounds > max_rounds) {
        set_text("etcd: the latch " + op->name + " changed under every count-down (" + std::to_string(max_rounds) +
                 " rounds)");
        return latch_done(op, error::server_busy, 0);
    }
    request(txn_path, latch_read_txn(op->range), [self = shared_from_this(), op](error_code ec, http_reply r) {
        reply_error err;
        latch_read rd;
        ec = self->decode(
            ec, r, [&](std::string_view b, reply_error& e) { return parse_latch_read(b, rd, e); }, err);
        if (ec)
            return self->latch_done(op, ec, 0);
        // The name is what its first key is: a lock's key there refuses the latch (a member made
        // with the latch key shares its revision, and may be read first).
        if (rd.first && (!rd.latch || rd.first->create_revision != rd.latch->create_revision)) {
            self->set_text(kind_text_of(*rd.first, op->range));
            return self->latch_done(op, error::kind_mismatch, 0);
        }
        if (!rd.latch) {
            auto seconds = std::max<std::int64_t>(1, (op->ttl.count() + 999) / 1000);
            return self->request(grant_path, grant_request(seconds), [self, op](error_code ec, http_reply r) {
                reply_error err;
                lease_reply l;
                ec = self->decode(
                    ec, r, [&](std::string_view b, reply_error& e) { return parse_lease(b, l, e); }, err);
                if (ec)
                    return self->latch_done(op, ec, 0);
                self->put_member(op, 0, l.id, true);
            });
        }
        auto n = latch_count_in(rd.latch->value).value_or(0);
        if (n != op->count) {
            self->set_text("etcd: the latch " + op->name + " exists with a count of " + std::to_string(n) + ", not " +
                           std::to_string(op->count));
            return self->latch_done(op, error::count_mismatch, 0);
        }
        if (rd.members >= static_cast<std::int64_t>(n))  // done: no more members; waiters told again
            return self->keep_latch(op, rd.latch->lease, [self, op, rd] {
                self->touch_latch(op, rd.latch->create_revision, rd.latch->lease);
            });
        self->put_member(op, rd.latch->create_revision, rd.latch->lease, false);
    });
}

// `granted`: the lease is new (for a new latch): revoked if the put does not go through.
void etcd_store::impl::put_member(const latch_op_ptr& op, std::int64_t created, std::int64_t lease, bool granted)
{
    request(
        txn_path, latch_count_down_txn(op->range, created, op->count, op->member, lease),
        [self = shared_from_this(), op, lease, granted](error_code ec, http_reply r) {
            reply_error err;
            latch_count c;
            ec = self->decode(
                ec, r, [&](std::string_view b, reply_error& e) { return parse_latch_count_down(b, c, e); }, err);
            // Only a definite "not put" frees a new lease: after an error the put may have
            // run (the lease then carries the latch; unused, it runs out by itself).
            if (!ec && !c.put && granted)
                self->request(revoke_path, lease_id_request(lease), [](error_code, http_reply) {});
            if (ec)
                return self->latch_done(op, ec, 0);
            if (!c.put)
                return self->count_down_round(op);  // the latch changed since the read: read again
            auto members = static_cast<std::uint64_t>(std::max<std::int64_t>(c.members, 0));
            auto remaining = op->count - std::min(members, op->count);
            if (granted)
                return self->latch_done(op, error_code(), remaining);
            self->keep_latch(op, lease, [self, op, remaining] { self->latch_done(op, error_code(), remaining); });
        },
        milliseconds(0), false, false);  // not resent: a second send could not tell ours from another's
}

// A done latch counted down again: its key put again, so a waiter that missed the last
// count-down's new value (that count-down's reply was lost and it was retried) hears one.
void etcd_store::impl::touch_latch(const latch_op_ptr& op, std::int64_t created, std::int64_t lease)
{
    request(txn_path, latch_touch_txn(op->range, created, op->count, lease),
            [self = shared_from_this(), op](error_code ec, http_reply r) {
                reply_error err;
                bool put = false;
                ec = self->decode(
                    ec, r, [&](std::string_view b, reply_error& e) { return parse_succeeded(b, put, e); }, err);
                self->latch_done(op, ec, 0);
            });
}

// The latch's expiry set again: its lease kept alive once (back to its full TTL).
void etcd_store::impl::keep_latch(const latch_op_ptr& op, std::int64_t lease, std::function<void()> then)
{
    request(keepalive_path, lease_id_request(lease),
            [self = shared_from_this(), op, then = std::move(then)](error_code ec, http_reply r) {
                reply_error err;
                lease_reply l;
                ec = self->decode(
                    ec, r, [&](std::string_view b, reply_error& e) { return parse_lease(b, l, e); }, err);
                if (ec)
                    return self->latch_done(op, ec, 0);
                if (l.ttl <= 0)
                    return self->count_down_round(op);  // it ran out just now: the latch is gone
                then();
            });
}

void etcd_store::impl::latch_done(const latch_op_ptr& op, error_code ec, std::uint64_t remaining)
{
    post_moved(ex, *op->h, ec, remaining);
}

void etcd_store::do_count_down(const std::string& name, const std::string& member, std::uint64_t count,
                               std::chrono::milliseconds ttl, asio::any_completion_handler<count_down_signature> h)
{
    auto& m = *impl_;
    if (m.closed)
        return post_moved(m.ex, h, error_code(error::closed), std::uint64_t(0));
    if (detail::count_down_refusal(count, member)) {
        set_error_text("etcd: a latch needs a count from 1 to 2^40 and a member name");
        return post_moved(m.ex, h, error_code(error::invalid_option), std::uint64_t(0));
    }
    if (ttl.count() <= 0 || ttl > traits().max_ttl) {
        set_error_text("etcd: a latch's TTL must be positive and no longer than etcd's longest lease");
        return post_moved(m.ex, h, error_code(error::invalid_lease), std::uint64_t(0));
    }
    auto op = std::make_shared<impl::latch_op>();
    op->name = name;
    op->member = member;
    op->range = m.range_of(name);
    op->count = count;
    op->ttl = ttl;
    op->h = std::make_shared<asio::any_completion_handler<count_down_signature>>(std::move(h));
    m.count_down_round(op);
}

void etcd_store::do_latch_state(const std::string& name, asio::any_completion_handler<latch_state_signature> h)
{
    auto& m = *impl_;
    if (m.closed)
        return post_moved(m.ex, h, error_code(error::closed), latch_state{});
    m.request(txn_path, latch_read_txn(m.range_of(name)),
              [self = impl_, h = std::move(h)](error_code ec, http_reply r) mutable {
                  reply_error err;
                  latch_read rd;
                  ec = self->decode(
                      ec, r, [&](std::string_view b, reply_error& e) { return parse_latch_read(b, rd, e); }, err);
                  latch_state st;
                  if (!ec && rd.latch)
                      if (auto n = latch_count_in(rd.latch->value)) {
                          st.count = *n;
                          st.remaining = *n - std::min<std::uint64_t>(*n, static_cast<std::uint64_t>(
                                                                              std::max<std::int64_t>(rd.members, 0)));
                      }
                  post_moved(self->ex, h, ec, st);
              });
}

}  // namespace dlock
