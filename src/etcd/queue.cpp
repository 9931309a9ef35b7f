// SPDX-License-Identifier: BSL-1.0
// A queued token waits for the key created just before its own to go (etcd's waitDeletes):
// one transaction reads its place, a watch of the predecessor wakes it, and the first key
// is a grant told to the token's watcher.
#include "etcd/store_impl.hpp"

namespace dlock {

using namespace etcd::detail;
using boost::system::error_code;
using dlock::detail::ms_until;

void etcd_store::impl::start_queued(const std::string& name, const std::string& token, const key_value& mine,
                                    clock_type::time_point sent, milliseconds ttl)
{
    auto& slot = queue[{name, token}];
    if (slot && slot->mine == mine.create_revision)
        return;  // already waiting
    if (slot)
        drop_queued(slot, std::nullopt);
    slot = std::make_shared<queued>();
    slot->name = name;
    slot->token = token;
    slot->key = mine.key;
    slot->mine = mine.create_revision;
    slot->first_send = sent;
    slot->ttl = ttl;
    slot->retry = std::make_shared<boost::asio::steady_timer>(ex);
    check_queued(slot);
}

void etcd_store::impl::drop_queued(const std::shared_ptr<queued>& q, std::optional<watch_event> tell)
{
    q->done = true;
    if (q->stream)
        q->stream->cancel();
    q->retry->cancel();
    auto it = queue.find({q->name, q->token});
    if (it != queue.end() && it->second == q)
        queue.erase(it);
    if (tell)
        watches.tell(q->name, q->token, *tell);
}

void etcd_store::impl::drop_queued(const key_pair& k)
{
    if (auto q = queue.find(k); q != queue.end())
        drop_queued(q->second, std::nullopt);
}

void etcd_store::impl::retry_queued(const std::shared_ptr<queued>& q)
{
    q->retry->expires_after(q->pause.next(rng));
    q->retry->async_wait([self = shared_from_this(), q](error_code ec) {
        if (!ec && !q->done)
            self->check_queued(q);
    });
}

void etcd_store::impl::check_queued(const std::shared_ptr<queued>& q)
{
    if (q->done || q->checking)
        return;
    if (!watches.watched(q->name, q->token))
        return drop_queued(q, std::nullopt);  // nobody listens for the grant any more
    q->checking = true;
    request(txn_path, predecessor_txn(q->key, q->mine, range_of(q->name)), [this, q](error_code ec, http_reply r) {
        q->checking = false;
        if (q->done || closed)
            return;
        reply_error err;
        predecessor_reply p;
        ec = decode(
            ec, r, [&](std::string_view b, reply_error& e) { return parse_predecessor(b, p, e); }, err);
        if (ec)
            return retry_queued(q);
        q->pause.reset();
        on_predecessor(q, p);
    });
}

void etcd_store::impl::on_predecessor(const std::shared_ptr<queued>& q, const predecessor_reply& p)
{
    if (!p.mine_exists)
        return drop_queued(q, watch_event::resync);  // withdrawn, or gone with its lease
    if (!p.predecessor) {
        // Ours is the first key: the name is ours, its lease the session's.
        grant_notice g{static_cast<std::uint64_t>(q->mine),
                       std::min(q->ttl, ms_until(life.raw_deadline(), q->first_send)), q->key,
                       static_cast<std::uint64_t>(lease)};
        drop_queued(q, std::nullopt);
        watches.tell(q->name, q->token, watch_event::granted, std::move(g));
        return;
    }
    q->checked_rev = p.revision;
    if (q->stream && q->watching == p.predecessor->key)
        return;  // a re-check after the watch was created: the same key, watched
    watch_predecessor(q, p.predecessor->key);
}

// From now, not from the check's revision: a watch that starts in the past waits for etcd's
// catch-up loop (every 100 ms). A deletion between the check and the watch is caught by
// checking again once the watch exists (see `created`).
void etcd_store::impl::watch_predecessor(const std::shared_ptr<queued>& q, const std::string& pred)
{
    if (q->stream)
        q->stream->cancel();
    q->watching = pred;
    q->stream = watch_stream::start(
        ex, cfg, pool.pick(), watch_create_request(pred, {}, 0),
        [self = weak_from_this(), q, pred](error_code ec, const watch_message& m) {
            auto s = self.lock();
            if (!s || q->done)
                return;
            if (ec) {
                q->stream.reset();
                return s->retry_queued(q);  // cut: look again (nothing is lost: the check reads)
            }
            bool gone = m.canceled || m.compact_revision > 0 ||
                        std::any_of(m.deleted.begin(), m.deleted.end(), [&](auto& kv) { return kv.key == pred; });
            if (gone) {
                q->stream->cancel();
                q->stream.reset();
                return s->check_queued(q);
            }
            if (m.created && m.revision > q->checked_rev)
                s->check_queued(q);  // something happened between the check and the watch
        });
}

}  // namespace dlock
