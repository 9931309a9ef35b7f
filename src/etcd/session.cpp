// SPDX-License-Identifier: BSL-1.0
// The lease that carries every lock of the store: granted on the first acquire, kept alive
// each third of its TTL, taken as lost at its local deadline or at the server's word.
#include "etcd/store_impl.hpp"

namespace dlock {

using namespace etcd::detail;
using boost::system::error_code;
using std::chrono::milliseconds;
using clock_type = std::chrono::steady_clock;

void etcd_store::impl::ensure_session(std::int64_t want_s, std::function<void(error_code)> cont)
{
    if (closed)
        return cont(error::closed);
    if (lease)
        return cont({});
    if (!gate.wait(std::move(cont)))
        return;
    if (!probed)
        return probe(want_s);
    grant(want_s);
}

// One look at the server before the first grant: a server that is not an etcd gateway is
// a permanent error, not a connection to retry forever.
void etcd_store::impl::probe(std::int64_t want_s, bool again)
{
    request("/v3/maintenance/status", "{}", [this, want_s, again](error_code ec, http_reply r) {
        if (closed)
            return gate.opened(error::closed);
        if (ec && ec != error::connection_lost)
            return gate.opened(ec);
        // A member may drop one connection as it goes down; a server that is not etcd (Redis
        // closes on "POST") does it every time: one more try tells them apart.
        if (ec && !again)
            return probe(want_s, true);
        bool etcd = !ec && r.status == 200 && r.body.find("\"version\"") != std::string::npos;
        if (!etcd) {
            if (!ec && r.status != 200) {
                auto err = classify(r.status, r.body);
                if (err.code != error::protocol_error) {  // etcd, refusing: say why
                    set_text(err.text);
                    return gate.opened(err.code);
                }
            }
            set_text("etcd " + pool.current() + ": the server did not answer as an etcd v3 gateway (" +
                     (ec ? std::string("it closed the connection") : "HTTP " + std::to_string(r.status)) + ")");
            return gate.opened(error::protocol_error);
        }
        probed = true;
        grant(want_s);
    });
}

void etcd_store::impl::grant(std::int64_t want_s)
{
    auto ttl = cfg.lease_ttl.count() > 0 ? static_cast<std::int64_t>(cfg.lease_ttl.count()) : want_s;
    auto sent = clock_type::now();
    request(grant_path, grant_request(ttl), [this, ttl, sent](error_code ec, http_reply r) {
        reply_error err;
        lease_reply l;
        if (auto e = decode(
                ec, r, [&](std::string_view b, reply_error& e) { return parse_lease(b, l, e); }, err))
            return gate.opened(e);
        if (l.id == 0 || l.ttl <= 0) {
            set_text("etcd: a lease grant without an ID or TTL");
            return gate.opened(error::protocol_error);
        }
        if (l.ttl > ttl) {
            // The cluster raised it to its minimum: our deadlines would be wrong.
            request(revoke_path, lease_id_request(l.id), [](error_code, http_reply) {});
            set_text("etcd: a lease of " + std::to_string(ttl) + " s is below the cluster's minimum of " +
                     std::to_string(l.ttl) + " s (set by its election timeout)");
            return gate.opened(error::invalid_lease);
        }
        lease = l.id;
        // A keep-alive each third of the TTL; after a failed one, again soon.
        auto third = milliseconds(std::max<std::int64_t>(l.ttl * 1000 / 3, 100));
        auto up = life.opened(static_cast<std::uint64_t>(l.id), sent, std::chrono::seconds(l.ttl),
                              {third, std::min(third / 2, milliseconds(250))});
        arm_keepalive();
        arm_deadline();
        watches.tell_session(up, life.info());
        gate.opened({});
    });
}

void etcd_store::impl::arm_keepalive()
{
    keepalive_timer.expires_at(life.next_keepalive());
    keepalive_timer.async_wait([self = shared_from_this(), l = lease](error_code ec) {
        if (!ec && !self->closed && self->lease == l)
            self->keepalive();
    });
}

void etcd_store::impl::arm_deadline()
{
    deadline_timer.expires_at(life.deadline());
    deadline_timer.async_wait([self = shared_from_this(), l = lease](error_code ec) {
        if (ec || self->closed || self->lease != l)
            return;
        if (self->life.expired(clock_type::now()))
            self->session_gone("etcd: no keep-alive of lease " + std::to_string(l) +
                               " was confirmed before its local deadline");
    });
}

void etcd_store::impl::keepalive()
{
    auto sent = clock_type::now();
    auto l = lease;
    auto third = milliseconds(std::max<std::int64_t>(life.ttl().count() / 3, 100));
    request(
        keepalive_path, lease_id_request(l),
        [this, sent, l](error_code ec, http_reply r) {
            if (closed || lease != l)
                return;
            reply_error err;
            lease_reply out;
            ec = decode(
                ec, r, [&](std::string_view b, reply_error& e) { return parse_lease(b, out, e); }, err);
            if (!ec && out.ttl <= 0)
                return session_gone("etcd: lease " + std::to_string(l) + " expired at the server");
            if (ec == error::session_lost)
                return session_gone(err.text);
            std::optional<session_event> ev;
            if (ec) {
                ev = life.unconfirmed(clock_type::now());
            } else {
                ev = life.confirmed(sent, std::chrono::seconds(out.ttl));
                arm_deadline();
            }
            arm_keepalive();
            if (ev)
                watches.tell_session(*ev, life.info());
        },
        std::min(cfg.request_timeout, third), true);  // ahead of queued requests
}

// The lease is gone (or can no longer be trusted): every lock of it is lost at once.
void etcd_store::impl::session_gone(std::string why)
{
    if (!lease)
        return;
    set_text(std::move(why));
    auto old = life.end();
    auto old_id = std::exchange(lease, 0);
    slots.clear();  // every key of the lease is gone with it
    keepalive_timer.cancel();
    deadline_timer.cancel();
    // Best effort: a lease we stopped trusting must not keep its keys until it expires.
    request(revoke_path, lease_id_request(old_id), [](error_code, http_reply) {});
    watches.tell_session(session_event::lost, old);
    // Queued keys went with the lease: their waiters must queue again.
    queue.end_all(true);
    stop_permit_waits(true);
}

}  // namespace dlock
