// SPDX-License-Identifier: BSL-1.0
// An acquire (one transaction: put our key if absent, read the first key) and a release
// (delete our key if it is still ours), in token order, on the store's lease.
#include "etcd/latch_codec.hpp"
#include "etcd/store_impl.hpp"

namespace dlock {

using namespace etcd::detail;
using boost::system::error_code;
using dlock::detail::ms_until;
using dlock::detail::post_completion;
using std::chrono::milliseconds;
using clock_type = std::chrono::steady_clock;

std::string etcd_store::impl::slot_key(const std::string& name, std::size_t slot, lease_kind kind) const
{
    bool rw = kind == lease_kind::read || kind == lease_kind::write;
    auto k = lock_key(rw ? side_prefix(range_of(name), kind == lease_kind::write) : range_of(name), lease);
    return slot == 0 ? k : k + "-" + std::to_string(slot);
}

std::string etcd_store::impl::key_for(const std::string& name, const std::string& token, lease_kind kind) const
{
    auto slot = lease ? slots.find(name, token) : std::nullopt;
    return slot ? slot_key(name, *slot, kind) : std::string();
}

std::string etcd_store::impl::assign_key(const std::string& name, const std::string& token, lease_kind kind)
{
    return lease ? slot_key(name, slots.assign(name, token), kind) : std::string();
}

std::string_view etcd_store::impl::first_value(lease_kind kind, const std::string& token)
{
    return kind == lease_kind::leader ? std::string_view() : std::string_view(token);
}

our_key etcd_store::impl::our_key_of(const lease_key& k, const std::string& key) const
{
    if (k.kind == lease_kind::permit)
        if (auto it = permit_values.find({k.name, k.token}); it != permit_values.end())
            return {key, slots.created(k.name, k.token), it->second.value};
    return {key, slots.created(k.name, k.token), first_value(k.kind, k.token)};
}

void etcd_store::impl::acquire(const lease_request& req, acquire_handler h, bool retried)
{
    if (!retried)
        order.begin({req.name, req.token});
    // std::function wants a copyable target: the handler rides in a shared_ptr.
    auto hp = std::make_shared<acquire_handler>(std::move(h));
    ensure_session(req.ttl.count() / 1000, [self = shared_from_this(), req, retried, hp](error_code ec) {
        if (ec)
            return self->acquired(req, std::move(*hp), ec, acquire_result{});
        self->send_acquire(req, std::move(*hp), retried);
    });
}

// Completes an acquire, then lets the releases of its token that waited for it go.
void etcd_store::impl::acquired(const lease_request& req, acquire_handler h, error_code ec, acquire_result res)
{
    post_completion(ex, std::move(h), ec, std::move(res));
    for (auto& f : order.end({req.name, req.token}))
        f();
}

void etcd_store::impl::send_acquire(const lease_request& req, acquire_handler h, bool retried)
{
    auto range = range_of(req.name);
    auto key = assign_key(req.name, req.token, req.kind);
    if (req.kind == lease_kind::read || req.kind == lease_kind::write)
        return send_rw_acquire(req, std::move(h), retried, key);
    auto l = lease;
    auto sent = clock_type::now();
    std::string value(first_value(req.kind, req.token));
    bool permit = req.kind == lease_kind::permit;
    if (permit) {  // a semaphore's attempt always puts its key, and reads the first N
        auto& e = permit_values[{req.name, req.token}];
        e = {req.capacity, permit_value(req.token, req.capacity)};
        value = e.value;
    }
    auto body = permit      ? queued_acquire_txn(key, range, value, l, req.capacity)
                : req.queue ? queued_acquire_txn(key, range, value, l)
                            : try_acquire_txn(key, range, value, l);
    request(txn_path, std::move(body),
            [this, req, retried, key, l, sent, value, permit, h = std::move(h)](error_code ec, http_reply r) mutable {
                reply_error err;
                acquire_reply a;
                ec = decode(
                    ec, r,
                    [&](std::string_view b, reply_error& e) {
                        return parse_acquire(b, req.queue || permit, key, value, l, a, e);
                    },
                    err);
                if (ec == error::session_lost) {
                    if (lease == l)
                        session_gone(err.text);
                    if (!retried)  // our lease vanished under us: once more, with a new one
                        return acquire(req, std::move(h), true);
                }
                if (ec && permit && !is_transient(ec))
                    permit_values.erase({req.name, req.token});  // no release follows a permanent error
                if (ec)
                    return acquired(req, std::move(h), ec, acquire_result{});
                if (permit)
                    return on_permit_reply(req, a, key, l, sent, std::move(h));
                on_lock_reply(req, a, key, l, sent, value, std::move(h));
            });
}

// A mutex's or a candidate's attempt: held when ours is the first key; else queued behind
// it (a queued attempt) or nothing put (a try). A semaphore's key first refuses it.
void etcd_store::impl::on_lock_reply(const lease_request& req, const acquire_reply& a, const std::string& key,
                                     std::int64_t l, clock_type::time_point sent, const std::string& value,
                                     acquire_handler h)
{
    acquire_result res;
    // A candidate's key may carry its proclaimed value by now: ours if under our
    // lease (its name is this token's slot, only this token puts there).
    bool ours = a.mine && (req.kind == lease_kind::leader ? a.mine->lease == l : a.mine->value == value);
    if (ours && lease == l)
        slots.set_created(req.name, req.token, a.mine->create_revision);
    // A semaphore's, a latch's or a read-write lock's key first: the name is that.
    if (a.owner && a.owner->key != key && !is_lock_key(*a.owner, range_of(req.name))) {
        set_text(kind_text_of(*a.owner, range_of(req.name)));
        if (ours)
            return withdraw_key(req, key, a.mine->create_revision, error::kind_mismatch, std::move(h));
        if (!a.mine && lease == l)
            slots.free(req.name, req.token);  // a try that put nothing
        return acquired(req, std::move(h), error::kind_mismatch, acquire_result{});
    }
    if (ours && a.owner && a.owner->key == key) {
        res.acquired = true;
        res.fencing_token = static_cast<std::uint64_t>(a.mine->create_revision);
        // At least 1 ms: 0 would read as "as asked"; a lease this short is a late reply.
        res.granted_ttl = std::max(milliseconds(1), std::min(req.ttl, ms_until(life.raw_deadline(), sent)));
        res.lease_ref = key;
        res.session = static_cast<std::uint64_t>(l);
        queue.drop(req.name, req.token);
    } else {
        if (a.owner && a.owner->lease == l)
            contended[req.name] = true;  // our own holder's next confirmation says so
        if (req.queue && ours)
            start_queued(req.name, req.token, *a.mine, sent, req.ttl, range_of(req.name));
        else if (!a.mine && lease == l)
            slots.free(req.name, req.token);  // nothing was put: the slot is free
    }
    acquired(req, std::move(h), error_code(), std::move(res));
}

// `again`: asked again after a transient failure (the first try may have run).
void etcd_store::impl::release(const lease_key& k, release_handler h, bool again)
{
    queue.drop(k.name, k.token);
    if (closed)
        return post_completion(ex, std::move(h), error_code(error::closed), false);
    if (order.busy({k.name, k.token})) {
        auto hp = std::make_shared<release_handler>(std::move(h));
        return order.after({k.name, k.token}, [self = shared_from_this(), k, hp] { self->release(k, std::move(*hp)); });
    }
    stop_permit_wait({k.name, k.token});
    auto key = k.ref.empty() ? key_for(k.name, k.token, k.kind) : k.ref;
    if (key.empty()) {
        permit_values.erase({k.name, k.token});
        return post_completion(ex, std::move(h), error_code(), false);
    }
    auto permits = permit_values.find({k.name, k.token});
    auto firsts = k.kind == lease_kind::permit && permits != permit_values.end() ? permits->second.permits : 1u;
    request(
        txn_path, release_txn(our_key_of(k, key), range_of(k.name), firsts),
        [this, k, key, again, l = lease, h = std::move(h)](error_code ec, http_reply r) mutable {
            reply_error err;
            bool deleted = false, held = false;
            ec = decode(
                ec, r, [&](std::string_view b, reply_error& e) { return parse_release(b, key, deleted, held, e); },
                err);
            if (k.kind == lease_kind::read)
                held = deleted;  // readers hold together: the first key says nothing of ours
            if (ec && is_transient(ec) && !closed && l != 0 && lease == l)
                return release_later(k, std::move(h));
            if (!ec && again && !deleted)
                held = true;  // gone when asked again: most likely the first try, whose reply was lost, did it
            if (!ec) {
                slots.free(k.name, k.token);  // deleted, or not ours: the token has no key now
                permit_values.erase({k.name, k.token});
            }
            if (!ec && held)  // our own tokened watchers hear it here, not on a stream
                watches.tell_tokens(k.name, k.token, watch_event::released);
            post_completion(ex, std::move(h), ec, held);
        },
        milliseconds(0), false, false);  // not idempotent: a second try finds nothing
}

// The key lives as long as the lease does, in front of every contender: a release that may
// not have run is asked again while the lease lives (its end deletes the key).
void etcd_store::impl::release_later(const lease_key& k, release_handler h)
{
    auto hp = std::make_shared<release_handler>(std::move(h));
    auto t = std::make_shared<boost::asio::steady_timer>(ex, std::max(milliseconds(10), life.ttl() / 20));
    t->async_wait([self = shared_from_this(), t, k, hp](error_code) { self->release(k, std::move(*hp), true); });
}

}  // namespace dlock
