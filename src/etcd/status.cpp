// SPDX-License-Identifier: BSL-1.0
// What a name holds: its keys' status, and an election's leader with the value it
// proclaimed, kept as the value of the leader's key (etcd's concurrency.Election layout:
// `etcdctl elect -l` reads dlock's value and dlock reads etcdctl's).
#include "etcd/store_impl.hpp"

namespace dlock {

namespace asio = boost::asio;
using namespace etcd::detail;
using boost::system::error_code;
using dlock::detail::ms_until;
using dlock::detail::post_moved;
using std::chrono::milliseconds;
using clock_type = std::chrono::steady_clock;

void etcd_store::impl::answer_status(const std::string& name, asio::any_completion_handler<status_signature> h,
                                     bool with_value)
{
    if (closed)
        return post_moved(ex, h, error_code(error::closed), lock_status{});
    request(range_path, range_request(range_of(name)),
            [self = shared_from_this(), name, with_value, h = std::move(h)](error_code ec, http_reply r) mutable {
                reply_error err;
                range_reply rr;
                ec = self->decode(
                    ec, r, [&](std::string_view b, reply_error& e) { return parse_range(b, rr, e); }, err);
                lock_status s;
                if (ec || rr.kvs.empty())
                    return post_moved(self->ex, h, ec, s);
                const auto& first = rr.kvs.front();
                s.held = true;
                s.holder = first.value;
                s.key = first.key;
                s.fencing_token = static_cast<std::uint64_t>(first.create_revision);
                for (auto& kv : rr.kvs)
                    s.last_fencing_token =
                        std::max(s.last_fencing_token, static_cast<std::uint64_t>(kv.create_revision));
                s.queued = rr.kvs.size() - 1;
                auto range = self->range_of(name);
                if (is_rw_key(range, first.key)) {  // a read-write lock: a writer, or the readers before one
                    s.kind = lease_kind::read;
                    s.holders = holders_of(range, rr.kvs).size();
                    s.writer = first.key.rfind(side_prefix(range, true), 0) == 0;
                    s.queued = rr.kvs.size() - s.holders;
                } else if (auto n = permits_in(first.value)) {  // a semaphore: its first N keys hold
                    s.kind = lease_kind::permit;
                    s.capacity = *n;
                    s.holders = std::min<std::size_t>(rr.kvs.size(), *n);
                    s.queued = rr.kvs.size() - s.holders;
                }
                // A candidate that has proclaimed nothing yet has put no value: no value.
                if (with_value && !first.value.empty())
                    s.value = first.value;
                // The holder's remaining lease, for operators. This store's own lease: to the
                // millisecond, as its keep-alives confirmed it.
                if (first.lease != 0 && first.lease == self->lease) {
                    s.ttl = ms_until(self->life.deadline(), clock_type::now());
                    return post_moved(self->ex, h, error_code(), std::move(s));
                }
                // Another client's: etcd tells whole seconds, rounded down (a 1 s lease always
                // reads 0): the middle of that second, no more than the lease granted.
                self->request(ttl_path, lease_id_request(first.lease),
                              [self, s, h = std::move(h)](error_code ec, http_reply r) mutable {
                                  lease_reply l;
                                  reply_error err;
                                  if (!ec && r.status == 200 && parse_lease(r.body, l, err) && l.ttl >= 0) {
                                      s.ttl = std::chrono::seconds(l.ttl) + milliseconds(500);
                                      if (l.granted_ttl > 0)
                                          s.ttl = std::min<milliseconds>(s.ttl, std::chrono::seconds(l.granted_ttl));
                                  }
                                  post_moved(self->ex, h, error_code(), std::move(s));
                              });
            });
}

void etcd_store::do_status(const std::string& name, asio::any_completion_handler<status_signature> h)
{
    impl_->answer_status(name, std::move(h), false);
}

void etcd_store::do_leader(const std::string& name, asio::any_completion_handler<leader_signature> h)
{
    impl_->answer_status(name, std::move(h), true);
}

// The value goes into our key if it is still the key we put (Election.Proclaim): a leader's
// key is the first of the name until it goes, and a key gone cannot come back with the same
// create revision.
void etcd_store::do_proclaim(const lease_key& key, const std::string& value,
                             asio::any_completion_handler<proclaim_signature> h)
{
    auto& m = *impl_;
    if (m.closed)
        return post_moved(m.ex, h, error_code(error::closed), false);
    auto k = key.ref.empty() ? m.key_for(key.name, key.token, key.kind) : key.ref;
    auto created = m.slots.created(key.name, key.token);
    if (k.empty() || created == 0 || m.lease == 0)
        return post_moved(m.ex, h, error_code(), false);  // nothing of ours under this lease
    m.request(txn_path, proclaim_txn(k, created, value, m.lease),
              [self = impl_, h = std::move(h)](error_code ec, http_reply r) mutable {
                  reply_error err;
                  bool written = false;
                  ec = self->decode(
                      ec, r, [&](std::string_view b, reply_error& e) { return parse_succeeded(b, written, e); }, err);
                  post_moved(self->ex, h, ec, written);
              });
}

}  // namespace dlock
