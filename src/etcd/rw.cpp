// SPDX-License-Identifier: BSL-1.0
// Read-write locks in the layout of etcd's contrib/recipes RWMutex: readers' keys under
// `<prefix><name>/read/`, writers' under `<prefix><name>/write/`, each `<lease hex>` (a slot
// suffix as the mutex's) on the store's lease. A writer holds when its key is the name's
// first by creation, and waits for the key created just before its own; a reader holds
// when no writer's key is older than its own, and waits for the last such writer. So
// readers in a row hold together and a later reader never passes a queued writer. Unlike
// the recipe, a waiter compares create revisions, not mod revisions, and a try leaves no key.
#include "etcd/store_impl.hpp"

namespace dlock {

using namespace etcd::detail;
using boost::system::error_code;
using dlock::detail::ms_until;
using std::chrono::milliseconds;

// One transaction, a try's too: our key put (or read back), the name's first key and the
// first writer's; a try that does not hold then deletes its key.
void etcd_store::impl::send_rw_acquire(const lease_request& req, acquire_handler h, bool retried,
                                       const std::string& key)
{
    auto l = lease;
    auto sent = clock_type::now();
    request(txn_path, rw_acquire_txn(key, range_of(req.name), req.token, l),
            [this, req, retried, key, l, sent, h = std::move(h)](error_code ec, http_reply r) mutable {
                reply_error err;
                acquire_reply a;
                std::optional<key_value> writer;
                ec = decode(
                    ec, r,
                    [&](std::string_view b, reply_error& e) {
                        return parse_rw_acquire(b, key, req.token, l, a, writer, e);
                    },
                    err);
                if (ec == error::session_lost) {
                    if (lease == l)
                        session_gone(err.text);
                    if (!retried)  // our lease vanished under us: once more, with a new one
                        return acquire(req, std::move(h), true);
                }
                if (ec)
                    return acquired(req, std::move(h), ec, acquire_result{});
                on_rw_reply(req, a, writer, key, l, sent, std::move(h));
            });
}

void etcd_store::impl::on_rw_reply(const lease_request& req, const acquire_reply& a,
                                   const std::optional<key_value>& first_writer, const std::string& key, std::int64_t l,
                                   clock_type::time_point sent, acquire_handler h)
{
    auto range = range_of(req.name);
    bool ours = a.mine && a.mine->value == req.token;
    if (ours && lease == l)
        slots.set_created(req.name, req.token, a.mine->create_revision);
    if (!ours) {
        if (!a.mine && lease == l)
            slots.free(req.name, req.token);
        return acquired(req, std::move(h), error_code(), acquire_result{});
    }
    // The name is what its first key is: a mutex's (etcdctl lock's too), a semaphore's or a
    // latch's first refuses us.
    if (a.owner && a.owner->key != key && !is_rw_key(range, a.owner->key)) {
        set_text(kind_text_of(*a.owner, range));
        return withdraw_key(req, key, a.mine->create_revision, error::kind_mismatch, std::move(h));
    }
    bool write = req.kind == lease_kind::write;
    bool held = write ? a.owner && a.owner->key == key
                      : !first_writer || first_writer->create_revision >= a.mine->create_revision;
    if (held) {
        acquire_result res;
        res.acquired = true;
        res.fencing_token = static_cast<std::uint64_t>(a.mine->create_revision);
        res.granted_ttl = std::max(milliseconds(1), std::min(req.ttl, ms_until(life.raw_deadline(), sent)));
        res.lease_ref = key;
        res.session = static_cast<std::uint64_t>(l);
        queue.drop(req.name, req.token);
        return acquired(req, std::move(h), error_code(), std::move(res));
    }
    if (a.owner && a.owner->lease == l)
        contended[req.name] = true;  // a holder of this store: its next confirmation says so
    if (!req.queue)
        return withdraw_key(req, key, a.mine->create_revision, error_code(), std::move(h));
    // A writer waits behind the key just before its own; a reader behind the last older writer.
    start_queued(req.name, req.token, *a.mine, sent, req.ttl, write ? range : side_prefix(range, true));
    acquired(req, std::move(h), error_code(), acquire_result{});
}

}  // namespace dlock
