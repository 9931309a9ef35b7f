// SPDX-License-Identifier: BSL-1.0
// A name's untokened watchers share one stream of the changes under the name (deletions,
// and the new values an election's leader proclaims); a cut
// stream starts again after a pause, from the next revision when it can (a compaction or
// a first start without one means releases may have been missed: resync).
#include "etcd/store_impl.hpp"

namespace dlock {

using namespace etcd::detail;
using boost::system::error_code;

void etcd_store::impl::start_name_stream(const std::string& name)
{
    auto& ns = names[name];
    if (!ns.retry)
        ns.retry = std::make_shared<boost::asio::steady_timer>(ex);
    auto range = range_of(name);
    ns.stream =
        watch_stream::start(ex, cfg, pool.pick(), watch_create_request(range, prefix_end(range), ns.next_rev, true),
                            [self = weak_from_this(), name](error_code ec, const watch_message& m) {
                                if (auto s = self.lock())
                                    s->on_name_message(name, ec, m);
                            });
}

void etcd_store::impl::on_name_message(const std::string& name, error_code ec, const watch_message& m)
{
    auto it = names.find(name);
    if (it == names.end())
        return;
    auto& ns = it->second;
    if (ec || m.canceled || m.compact_revision > 0) {
        if (ns.stream)
            ns.stream->cancel();
        ns.stream.reset();
        bool lost_events = m.compact_revision > 0 || ns.next_rev == 0;
        if (m.compact_revision > 0)
            ns.next_rev = 0;  // from now: what was compacted is gone
        watches.name_down(name, ns.created && lost_events ? std::optional(watch_event::resync) : std::nullopt);
        ns.retry->expires_after(ns.pause.next(rng));
        ns.retry->async_wait([w = weak_from_this(), name](error_code ec) {
            auto s = w.lock();
            if (!ec && s && !s->closed && s->names.count(name))
                s->start_name_stream(name);
        });
        return;
    }
    ns.pause.reset();
    if (m.revision > 0)
        ns.next_rev = m.revision + 1;
    if (m.created) {
        ns.created = true;
        watches.name_ready(name);
    }
    // A key gone, or a key's new value (an election's proclaim): the watchers re-read.
    if (!m.deleted.empty() || !m.rewritten.empty())
        watches.tell_name(name, watch_event::released);
}

void etcd_store::impl::stop_name_stream(const std::string& name)
{
    auto n = names.find(name);
    if (n == names.end())
        return;
    if (n->second.stream)
        n->second.stream->cancel();
    if (n->second.retry)
        n->second.retry->cancel();
    names.erase(n);
}

}  // namespace dlock
