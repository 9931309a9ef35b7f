// SPDX-License-Identifier: BSL-1.0
// A semaphore in a layout of ours: every permit is a key of the name's range, as a mutex's
// (`<prefix><name>/<lease hex>`, on the store's lease), with the value
// `dlock-semaphore/<N>/<token>`; the first N keys by creation hold. An attempt puts its key
// and reads the first N in one transaction; a queued one that is not among them keeps its
// key and re-reads at every deletion in the range (its own watch stream), a try deletes
// it. A first key that is not a permit of the same N refuses the attempt (kind_mismatch).
#include "etcd/latch_codec.hpp"
#include "etcd/store_impl.hpp"

#include <algorithm>

namespace dlock {

using namespace etcd::detail;
using boost::system::error_code;
using dlock::detail::ms_until;
using std::chrono::milliseconds;

void etcd_store::impl::on_permit_reply(const lease_request& req, const acquire_reply& a, const std::string& key,
                                       std::int64_t l, clock_type::time_point sent, acquire_handler h)
{
    const auto& value = permit_values[{req.name, req.token}].value;
    bool ours = a.mine && a.mine->value == value;
    if (ours && lease == l)
        slots.set_created(req.name, req.token, a.mine->create_revision);
    if (!ours) {
        if (!a.mine && lease == l)
            slots.free(req.name, req.token);
        permit_values.erase({req.name, req.token});
        return acquired(req, std::move(h), error_code(), acquire_result{});
    }
    // The name is what its keys before ours are: another kind, or a semaphore of another
    // size (even one being withdrawn), refuses us.
    for (auto& kv : a.firsts) {
        if (kv.key == key)
            break;
        auto range = range_of(req.name);
        if (permits_in(kv.value) != std::optional<unsigned>(req.capacity) || is_rw_key(range, kv.key) ||
            is_latch_key(range, kv.key)) {
            set_text(kind_text_of(kv, range));
            return withdraw_key(req, key, a.mine->create_revision, error::kind_mismatch, std::move(h));
        }
    }
    if (std::any_of(a.firsts.begin(), a.firsts.end(), [&](const key_value& kv) { return kv.key == key; })) {
        stop_permit_wait({req.name, req.token});
        acquire_result res;
        res.acquired = true;
        res.fencing_token = static_cast<std::uint64_t>(a.mine->create_revision);
        res.granted_ttl = std::max(milliseconds(1), std::min(req.ttl, ms_until(life.raw_deadline(), sent)));
        res.lease_ref = key;
        res.session = static_cast<std::uint64_t>(l);
        return acquired(req, std::move(h), error_code(), std::move(res));
    }
    if (std::any_of(a.firsts.begin(), a.firsts.end(), [&](const key_value& kv) { return kv.lease == l; }))
        contended[req.name] = true;  // a holder of this store: its next confirmation says so
    if (!req.queue)
        return withdraw_key(req, key, a.mine->create_revision, error_code(), std::move(h));
    start_permit_wait(req.name, req.token, a.revision);
    acquired(req, std::move(h), error_code(), acquire_result{});
}

void etcd_store::impl::withdraw_key(const lease_request& req, const std::string& key, std::int64_t created,
                                    error_code ec, acquire_handler h)
{
    request(txn_path, delete_if_created_txn(key, created),
            [this, req, key, created, ec, l = lease, h = std::move(h)](error_code dec, http_reply r) mutable {
                reply_error err;
                bool deleted = false;
                dec = decode(
                    dec, r, [&](std::string_view b, reply_error& e) { return parse_succeeded(b, deleted, e); }, err);
                if (dec) {  // a permanent error is followed by no release: delete it in the background
                    delete_later(key, created);
                    return acquired(req, std::move(h), dec, acquire_result{});
                }
                if (lease == l)
                    slots.free(req.name, req.token);
                permit_values.erase({req.name, req.token});
                acquired(req, std::move(h), ec, acquire_result{});
            });
}

// A key an attempt must not leave behind, deleted (if still the one created at `created`)
// and asked again while the store's lease lives (its end deletes the key).
void etcd_store::impl::delete_later(const std::string& key, std::int64_t created)
{
    auto t = std::make_shared<boost::asio::steady_timer>(ex, std::max(milliseconds(10), life.ttl() / 20));
    t->async_wait([w = weak_from_this(), t, key, created, l = lease](error_code) {
        auto s = w.lock();
        if (!s || s->closed || s->lease != l || l == 0)
            return;
        s->request(txn_path, delete_if_created_txn(key, created), [s, key, created](error_code ec, http_reply r) {
            reply_error err;
            bool deleted = false;
            if (s->decode(
                    ec, r, [&](std::string_view b, reply_error& e) { return parse_succeeded(b, deleted, e); }, err))
                s->delete_later(key, created);
        });
    });
}

// From the revision the attempt read at: a deletion after it is seen (a watch starting in
// the past is caught up by etcd).
void etcd_store::impl::start_permit_wait(const std::string& name, const std::string& token, std::int64_t revision)
{
    key_pair k{name, token};
    if (permit_waits.count(k) || closed)
        return;  // already waiting
    auto range = range_of(name);
    permit_waits[k] =
        watch_stream::start(ex, cfg, pool.pick(), watch_create_request(range, prefix_end(range), revision + 1),
                            [self = weak_from_this(), k](error_code ec, const watch_message& m) {
                                if (auto s = self.lock())
                                    s->on_permit_message(k, ec, m);
                            });
}

void etcd_store::impl::on_permit_message(const key_pair& k, error_code ec, const watch_message& m)
{
    if (!permit_waits.count(k))
        return;
    if (!watches.watched(k.first, k.second))
        return stop_permit_wait(k);  // nobody waits for it any more
    if (ec || m.canceled || m.compact_revision > 0) {
        // Cut: the next attempt, after a pause, reads again and watches anew.
        stop_permit_wait(k);
        auto t = std::make_shared<boost::asio::steady_timer>(ex, milliseconds(100));
        return t->async_wait([w = weak_from_this(), t, k](error_code e) {
            if (auto s = w.lock(); s && !e && !s->closed)
                s->watches.tell(k.first, k.second, watch_event::resync);
        });
    }
    if (!m.deleted.empty())
        watches.tell(k.first, k.second, watch_event::resync);  // a permit may be ours now: read again
}

void etcd_store::impl::stop_permit_wait(const key_pair& k)
{
    auto it = permit_waits.find(k);
    if (it == permit_waits.end())
        return;
    if (it->second)
        it->second->cancel();
    permit_waits.erase(it);
}

// `tell`: the waiters read again (the session went, and their keys with it).
void etcd_store::impl::stop_permit_waits(bool tell)
{
    for (auto& [k, stream] : std::exchange(permit_waits, {})) {
        if (stream)
            stream->cancel();
        if (tell)
            watches.tell(k.first, k.second, watch_event::resync);
    }
}

}  // namespace dlock
