// SPDX-License-Identifier: BSL-1.0
// A queued token waits for the key created just before its own to go (etcd's waitDeletes).
// The kit's machine (common/predecessor_wait.hpp) decides; here one transaction reads the
// place, a watch stream follows the predecessor, a timer spaces retries, and the first key
// is a grant told to the token's watcher.
#include "etcd/store_impl.hpp"

namespace dlock {

using namespace etcd::detail;
using boost::system::error_code;
using dlock::detail::ms_until;
using dlock::detail::predecessor_wait;
using dlock::detail::wait_action;

void etcd_store::impl::start_queued(const std::string& name, const std::string& token, const key_value& mine,
                                    clock_type::time_point sent, milliseconds ttl, const std::string& prefix)
{
    if (auto q = queue.find(name, token); q && q->mine == mine.create_revision)
        return;  // already waiting
    auto q = std::make_shared<queued>(ex, rng);
    q->name = name;
    q->token = token;
    q->key = mine.key;
    q->prefix = prefix;
    q->mine = mine.create_revision;
    q->first_send = sent;
    q->ttl = ttl;
    queue.start(q);
}

void etcd_store::impl::perform(const queued_ptr& q, const wait_action& a)
{
    using type = wait_action::type;
    switch (a.t) {
    case type::check: return check_place(q);
    case type::watch: return watch_predecessor(q, a.key);
    case type::cancel_watch:
        if (auto s = std::exchange(q->stream, nullptr))
            s->cancel();
        return;
    case type::set_timer:
        q->retry.expires_after(a.delay);
        return q->retry.async_wait([self = shared_from_this(), q](error_code ec) {
            if (!ec)
                self->queue.feed(q, [](predecessor_wait& w) { w.on_timer(); });
        });
    case type::cancel_timer: return void(q->retry.cancel());
    case type::grant: {
        // Ours is the first key: the name is ours, its lease the session's.
        grant_notice g{static_cast<std::uint64_t>(q->mine),
                       std::min(q->ttl, ms_until(life.raw_deadline(), q->first_send)), q->key,
                       static_cast<std::uint64_t>(lease)};
        return void(watches.tell(q->name, q->token, watch_event::granted, std::move(g)));
    }
    case type::resync: return void(watches.tell(q->name, q->token, watch_event::resync));
    }
}

void etcd_store::impl::check_place(const queued_ptr& q)
{
    if (!watches.watched(q->name, q->token))
        return queue.feed(q, [](predecessor_wait& w) { w.on_abandon(); });  // nobody listens for the grant
    request(txn_path, predecessor_txn(q->key, q->mine, q->prefix), [this, q](error_code ec, http_reply r) {
        if (closed)
            return;
        reply_error err;
        predecessor_reply p;
        ec = decode(
            ec, r, [&](std::string_view b, reply_error& e) { return parse_predecessor(b, p, e); }, err);
        queue.feed(q, [&](predecessor_wait& w) {
            if (ec)
                w.on_check_failed();
            else if (!p.mine_exists)
                w.on_gone();  // withdrawn, or gone with its lease
            else if (!p.predecessor)
                w.on_first();
            else
                w.on_behind(p.predecessor->key, p.revision);
        });
    });
}

// From now, not from the check's revision: a watch that starts in the past waits for etcd's
// catch-up loop (every 100 ms). The machine reads again if the watch starts past the read.
void etcd_store::impl::watch_predecessor(const queued_ptr& q, const std::string& pred)
{
    q->stream = watch_stream::start(
        ex, cfg, pool.pick(), watch_create_request(pred, {}, 0),
        [self = weak_from_this(), q, pred](error_code ec, const watch_message& m) {
            auto s = self.lock();
            if (!s)
                return;
            bool gone =
                !ec && (m.canceled || m.compact_revision > 0 ||
                        std::any_of(m.deleted.begin(), m.deleted.end(), [&](auto& kv) { return kv.key == pred; }));
            s->queue.feed(q, [&](predecessor_wait& w) {
                if (ec)
                    w.on_watch_failed(pred);  // cut: look again after a pause (the read finds what was missed)
                else if (gone)
                    w.on_predecessor_gone(pred);
                else if (m.created)
                    w.on_watch_ready(pred, m.revision);
            });
        });
}

}  // namespace dlock
