// SPDX-License-Identifier: BSL-1.0
/// @file
/// The Redlock store: the store contract over N independent Redis masters, by majority.
#pragma once

#include <dlock/export.hpp>
#include <dlock/redis/config.hpp>
#include <dlock/redis/store.hpp>
#include <dlock/store.hpp>

#include <boost/json/fwd.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dlock {

namespace detail {
struct redlock_core;
}

/// Settings of a redlock_store. Every field has a working default.
struct redlock_options {
    /// Clock-drift margin of an acquisition: a lease of `ttl` counts only if the whole
    /// acquisition took less than ttl − (ttl × drift_factor + drift_min).
    double drift_factor = 0.01;
    std::chrono::milliseconds drift_min{2};  ///< the fixed part of that margin
    /// Limit of each request to each node (replaces every node's config::request_timeout).
    /// A node that is down costs at most this much to an operation that needs its answer,
    /// and nothing to one that reaches its quorum without it. Zero: keep each node's own
    /// request_timeout.
    std::chrono::milliseconds node_timeout{250};
};

/// The Redlock algorithm over N independent Redis masters (no replication between them),
/// built from one redis_store per node (same keys, scripts and channels as redis_store).
/// Quorum Q = N/2 + 1; use an odd N (3 or 5), though any N ≥ 1 works.
///
/// Every operation goes to all nodes at once and completes as soon as its outcome is
/// decided; replies still outstanding are handled in the background (the store may be
/// destroyed meanwhile: they then only drop their state). A vote is decided "yes" by Q
/// nodes saying yes, "no" by more than N − Q saying no, and error::no_quorum once failed
/// nodes (errors, timeouts) leave neither side able to get there: an unknown answer is never
/// reported as a "no" or a "yes".
///
/// - **try_acquire**: acquired iff Q nodes granted the lease, the fencing-token update below
///   was confirmed by Q nodes that hold it, and the whole acquisition took less than
///   ttl − drift. Otherwise the partial lease is released on every node (in the background)
///   and the result says not acquired, with holder_ttl = the time until enough of the
///   refusing nodes' leases end for a quorum to be free (−1 if unknown), or the operation
///   fails with error::no_quorum; it never reports acquired without a quorum. Idempotent for
///   the same lease token (see fencing tokens for the one exception).
/// - **renew**: owned iff Q nodes renewed; not owned iff more than N − Q said it is not
///   ours; else error::no_quorum (the lease may still be valid: retry). Contended if any
///   node reports it (a report that arrives after the decision is kept for the next renewal).
/// - **release**: sent to every node; true iff Q nodes released, false iff more than N − Q
///   did not hold it, else error::no_quorum.
/// - **force_release**: sent to every node and waits for every answer (each bounded by
///   node_timeout); true iff any node held the name; error::no_quorum if fewer than Q answered.
/// - **status**: waits for every answer (bounded by node_timeout); held iff Q nodes report a
///   lease of the same holder; then ttl = how long a quorum still holds it (the Q-th
///   longest of that holder's node TTLs) and fencing_token = that holder's token;
///   last_fencing_token = the highest counter among the nodes that answered;
///   error::no_quorum if fewer than Q answered.
/// - **watch**: subscribes on every node; `released` on a release message from any node
///   (a release is usually heard once per node), `resync` when any node resubscribes after a
///   reconnect, and `ready` once Q subscriptions are confirmed: any holder's quorum
///   intersects those Q nodes, so its release is published on at least one channel heard.
///
/// **Fencing tokens.** Each node keeps its own counter (INCR per lease, as redis_store).
/// After a quorum grants the lease, the token is T = the largest counter value among the
/// granting replies. The store completes as acquired only once Q nodes hold the lease with
/// counters ≥ T: at once if Q granting replies carry T itself (the counters are in step, the
/// usual case); otherwise it first raises the counter of *every* node to at least T (and
/// records T as the lease's token where the lease is held) and waits until Q nodes holding
/// the lease confirmed it (a node that grants late with a lower value is raised too). The
/// next lease must be granted by a quorum, which shares a node with those Q; that node
/// grants it only after this lease ended there, when its counter was already ≥ T, so its
/// INCR and the next token exceed T. Hence tokens strictly increase from lease to lease,
/// given:
///   - Redlock's timing assumptions (bounded clock drift, pauses shorter than the drift
///     margin): they are what orders the leases in the first place;
///   - counters survive: a node restarted *without* its data (no AOF, or AOF with
///     appendfsync everysec losing its last second) counts on from wherever its data was
///     left. Tokens still increase while the nodes that lost data, together with the nodes
///     that missed the last lease's counter update (down or cut off then), are a minority; if
///     they make a majority (e.g. a majority restarted without persistence), a token can
///     repeat or go back (tested). Run the nodes with `appendonly yes` and `appendfsync
///     always` to rely on fencing tokens.
/// A retry with the same lease token returns the same token T, unless the set of nodes
/// holding the lease changed in between (a node that missed the first attempt grants it on
/// the retry): it then returns a larger token, still unique to this lease and larger than
/// every earlier lease's.
///
/// An acquisition costs one round trip to all nodes in parallel while their counters are in
/// step, and a second one (the counter update) when they differ, e.g. after a node missed
/// leases; that update brings them back in step. Errors: error::no_quorum (too few nodes answered; if a node failed
/// permanently, e.g. permission_denied, that error instead, its text in last_error_text()),
/// error::invalid_lease (a ttl above 2^46 ms, before sending), error::closed (the store
/// was closed or destroyed). Cancellation of any operation (terminal, partial): completes
/// with operation_aborted at once; the requests already sent finish in the background, and
/// a lease an aborted try_acquire obtained is released. Executor: one single-threaded
/// executor for all nodes.
/// @cancellation Terminal and partial, for every operation: as said above.
/// @threadsafety None: one single-threaded executor for all nodes.
class DLOCK_API redlock_store final : public store {
public:
    /// One config per node. Throws std::invalid_argument if `nodes` is empty.
    redlock_store(boost::asio::any_io_executor ex, std::vector<redis::config> nodes, std::string ns = "dlock",
                  redlock_options opts = {});
    /// Does not close the nodes: operations still in flight keep them and finish in the
    /// background. Call close() first to end them at once (error::closed).
    ~redlock_store() override;

    boost::asio::any_io_executor get_executor() const override;
    /// No direct hand-off; mutex leases up to 2^46 ms (as redis_store); fencing not durable
    /// (see fencing tokens below).
    store_traits traits() const noexcept override;
    /// "redlock N nodes: <node>, <node>, ..." (passwords never shown).
    std::string describe() const override;
    using store::watch;
    /// The token is ignored: there is no direct hand-off.
    watch_id watch(const std::string& name, const std::string& token, watch_callback cb) override;
    void unwatch(watch_id id) override;

    std::size_t size() const noexcept;    ///< N, the number of nodes
    std::size_t quorum() const noexcept;  ///< N/2 + 1
    /// The local drift margin for a lease of `ttl`: ttl × drift_factor + drift_min.
    std::chrono::milliseconds drift(std::chrono::milliseconds ttl) const noexcept;
    /// Node `i`'s own store (its keys, connection and subscriber), for tools and tests.
    redis_store& node(std::size_t i);

    /// Closes every node's connections: pending operations complete with error::closed.
    void close() override;

private:
    void do_connect(boost::asio::any_completion_handler<connect_signature> h) override;
    void do_try_acquire(const lease_request& req, boost::asio::any_completion_handler<acquire_signature> h) override;
    void do_renew(const lease_key& key, std::chrono::milliseconds ttl,
                  boost::asio::any_completion_handler<renew_signature> h) override;
    void do_release(const lease_key& key, boost::asio::any_completion_handler<bool_signature> h) override;
    void do_force_release(const std::string& name, lease_kind side,
                          boost::asio::any_completion_handler<bool_signature> h) override;
    void do_status(const std::string& name, boost::asio::any_completion_handler<status_signature> h) override;

    std::shared_ptr<detail::redlock_core> core_;
};

/// Parses a node list: either a JSON array (text starting with '[') whose elements are URL
/// strings or objects as redis::parse_json reads them, or comma-separated URLs as
/// redis::parse_url reads them ("redis://a:6379,redis://b:6379"). Returns false and fills
/// `err` on bad input; the message names the element (position and text, password hidden).
/// An empty list is an error.
DLOCK_API bool parse_node_list(std::string_view text, std::vector<redis::config>& out, redis::config_error& err);

/// The same from a JSON array already parsed.
DLOCK_API bool parse_node_json(const boost::json::value& v, std::vector<redis::config>& out, redis::config_error& err);

}  // namespace dlock
