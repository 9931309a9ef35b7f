// SPDX-License-Identifier: BSL-1.0
#include <dlock/error.hpp>
#include <dlock/redis/redlock_store.hpp>

#include "common/post_completion.hpp"
#include "common/stored_handler.hpp"
#include "core/kind_text.hpp"
#include "redis/describe.hpp"
#include "redis/node_list.hpp"
#include "redis/redlock_scripts.hpp"
#include "redis/redlock_tally.hpp"
#include "redis/script_replies.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <array>
#include <limits>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

namespace dlock {

namespace asio = boost::asio;
using boost::system::error_code;
using clock_type = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct detail::redlock_core {
    redlock_core(asio::any_io_executor e, std::vector<redis::config> cfgs, const std::string& ns, redlock_options o)
        : ex(e), opts(o)
    {
        for (auto& c : cfgs) {
            address += (address.empty() ? "" : ", ") + detail::config_address(c);
            if (opts.node_timeout.count() > 0)
                c.request_timeout = opts.node_timeout;
            nodes.push_back(std::make_unique<redis_store>(e, std::move(c), ns));
        }
        n = nodes.size();
        q = n / 2 + 1;
    }

    asio::any_io_executor ex;
    redlock_options opts;
    std::vector<std::unique_ptr<redis_store>> nodes;
    std::size_t n = 0, q = 0;
    bool closed = false;
    std::string address;  // every node's, for describe()
    // Sets the store's last_error_text; emptied when the store goes (the core may outlive it).
    std::function<void(std::string)> keep_text;
    redis::script raise{scripts::raise_fence};
    // Contended reports that came after a renewal was decided, for the next renewal.
    std::unordered_set<std::string> late_contended;

    struct watch_state {
        store::watch_callback cb;
        std::vector<char> confirmed;  // per node: its subscription was confirmed once
        std::size_t confirmed_count = 0;
        bool ready_sent = false;
        bool active = true;
    };
    struct watch_entry {
        std::vector<store::watch_id> node_ids;
        std::shared_ptr<watch_state> state;
    };
    store::watch_id next_watch = 1;
    std::unordered_map<store::watch_id, watch_entry> watches;

    milliseconds drift(milliseconds ttl) const noexcept
    {
        return milliseconds(static_cast<long long>(static_cast<double>(ttl.count()) * opts.drift_factor)) +
               opts.drift_min;
    }

    static std::string lease_key(const std::string& name, const std::string& token) { return name + '\n' + token; }

    // Best effort, in the background: frees `token`'s lease on every node. Each node's
    // connection runs requests in order, so this follows any acquire still in flight there.
    void release_everywhere(const std::string& name, const std::string& token)
    {
        for (auto& node : nodes)
            node->async_release(dlock::lease_key{name, token, {}}, [](error_code, bool) {});
    }
};

namespace {

// error::closed once the store is closed or gone, else no_quorum.
error_code quorum_error(const std::shared_ptr<detail::redlock_core>& c)
{
    return (!c || c->closed) ? error_code(error::closed) : error_code(error::no_quorum);
}

// The state every fan-out operation shares: the caller's handler, completed once, either
// when the outcome is decided or at once on cancellation. Replies after that only finish
// the operation's background duties.
template <class Signature>
struct op_base {
    op_base(asio::any_io_executor e, asio::any_completion_handler<Signature> h, std::size_t nodes)
        : ex(std::move(e)), handler(std::move(h)), n(nodes)
    {
    }

    asio::any_io_executor ex;
    detail::stored_handler<Signature> handler;
    asio::cancellation_slot slot;
    std::size_t n;
    std::size_t replies = 0;
    bool decided = false;  // the outcome is known (the handler may have been completed earlier by cancellation)

    bool completed() const noexcept { return !handler; }
    std::size_t outstanding() const noexcept { return n - replies; }

    // A node's permanent failure (an ACL refusal, a foreign key type): when no majority is
    // reached, reporting it beats no_quorum, which the caller would retry forever.
    error_code permanent;
    void note_failure(error_code ec, const std::shared_ptr<detail::redlock_core>& c, std::size_t node)
    {
        if (c && node < c->nodes.size())
            note_failure(ec, c, c->nodes[node]->last_error_text());
    }
    void note_failure(error_code ec, const std::shared_ptr<detail::redlock_core>& c, const std::string& text)
    {
        if (!ec || is_transient(ec) || permanent || ec == error::closed || ec == asio::error::operation_aborted)
            return;
        permanent = ec;
        if (c && c->keep_text)
            c->keep_text(text);
    }
    error_code no_majority(const std::shared_ptr<detail::redlock_core>& c) const
    {
        return permanent && c && !c->closed ? permanent : quorum_error(c);
    }

    // Terminal and partial cancellation complete at once; the node requests run on.
    template <class Self>
    static void arm_cancellation(const std::shared_ptr<Self>& self)
    {
        self->slot = asio::get_associated_cancellation_slot(self->handler);
        if (!self->slot.is_connected())
            return;
        std::weak_ptr<Self> weak = self;
        self->slot.assign([weak](asio::cancellation_type type) {
            auto s = weak.lock();
            if (!s || s->completed() ||
                (type & (asio::cancellation_type::terminal | asio::cancellation_type::partial)) ==
                    asio::cancellation_type::none)
                return;
            // The slot keeps this (weak) handler until reused: clearing it here would destroy
            // the running handler.
            detail::post_completion(s->ex, std::move(s->handler), error_code(asio::error::operation_aborted),
                                    typename Self::result_type{});
        });
    }

    // From a node's callback: the caller is not on the stack, so no extra post is needed.
    template <class Result>
    void complete(error_code ec, Result r)
    {
        decided = true;
        if (completed())
            return;
        if (slot.is_connected())
            slot.clear();
        asio::dispatch(ex, asio::append(std::move(handler), ec, std::move(r)));
    }
};

using redis::tally;
using redis::vote;

// try_acquire: phase 1 asks every node for the lease; with a quorum of grants, phase 2
// raises every node's counter to the token and waits for a quorum holding the lease.
struct acquire_op : op_base<store::acquire_signature> {
    using result_type = acquire_result;
    using op_base::op_base;

    std::weak_ptr<detail::redlock_core> core;
    std::string name, token;
    milliseconds ttl{};
    clock_type::time_point sent;
    std::size_t granted = 0;  // failures count only as missing votes
    std::size_t agree = 0;    // grants that carry `fence` itself
    std::vector<long long> refused_ttls;
    std::uint64_t fence = 0;
    bool in_step = false;  // granted without the counter update: late grants may need it
    // Phase 2.
    bool raising = false;
    std::size_t raise_replies = 0, confirmed = 0, not_held = 0;

    void fail(const std::shared_ptr<detail::redlock_core>& c, error_code ec, milliseconds hint)
    {
        if (c)
            c->release_everywhere(name, token);
        acquire_result r;
        r.holder_ttl = hint;
        complete(ec, r);
    }

    // How long until enough refusing nodes are free for a quorum, counting nodes that did
    // not refuse (granted, failed or silent) as free: the k-th shortest refusing TTL.
    milliseconds hint(std::size_t q) const
    {
        std::size_t others = n - refused_ttls.size();
        std::size_t k = q > others ? q - others : 1;
        if (refused_ttls.empty() || k > refused_ttls.size())
            return milliseconds(-1);
        auto v = refused_ttls;
        std::sort(v.begin(), v.end(), [](long long a, long long b) {
            auto key = [](long long x) { return x < 0 ? std::numeric_limits<long long>::max() : x; };
            return key(a) < key(b);
        });
        return v[k - 1] < 0 ? milliseconds(-1) : milliseconds(v[k - 1]);
    }

    static void on_grant(const std::shared_ptr<acquire_op>& self, std::size_t node, error_code ec,
                         const acquire_result& r)
    {
        auto& s = *self;
        ++s.replies;
        if (s.decided || s.raising) {
            // A late grant: the release or the counter update sent since covers it, except
            // after a grant without update, where a lagging node is brought up to the token.
            if (s.in_step && !ec && r.acquired && r.fencing_token < s.fence)
                if (auto c = s.core.lock(); c && !c->closed)
                    s.send_raise(*c, node, [](error_code, const redis::reply&) {});
            return;
        }
        if (!ec && r.acquired) {
            ++s.granted;
            if (r.fencing_token > s.fence) {
                s.fence = r.fencing_token;
                s.agree = 0;
            }
            s.agree += r.fencing_token == s.fence;
        } else if (!ec) {
            s.refused_ttls.push_back(r.holder_ttl.count());
        }
        auto c = s.core.lock();
        s.note_failure(ec, c, node);
        switch (tally(s.n, s.granted, s.refused_ttls.size(), s.outstanding())) {
        case vote::pending: return;
        case vote::yes:
            if (!c || c->closed)
                return s.fail(c, error::closed, milliseconds(-1));
            if (s.agree >= s.n / 2 + 1) {
                // A quorum holds the lease with counters already at the token: nothing to raise.
                s.in_step = true;
                return s.succeed(c);
            }
            if (s.completed())  // cancelled meanwhile: nobody will use the lease
                return s.fail(c, {}, milliseconds(-1));
            return s.start_raise(self, *c);
        case vote::no: return s.fail(c, {}, s.hint(s.n / 2 + 1));
        case vote::no_quorum: return s.fail(c, s.no_majority(c), milliseconds(-1));
        }
    }

    template <class Handler>
    void send_raise(detail::redlock_core& c, std::size_t i, Handler h)
    {
        auto& node = *c.nodes[i];
        std::array<std::string, 2> keys{node.fence_key(name), node.lock_key(name)};
        std::array<std::string, 2> args{std::to_string(fence), token};
        node.connection().async_eval(c.raise, keys, args, std::move(h));
    }

    void start_raise(const std::shared_ptr<acquire_op>& self, detail::redlock_core& c)
    {
        raising = true;
        for (std::size_t i = 0; i < c.n; ++i)
            send_raise(c, i, [self, i](error_code ec, redis::reply r) { on_raised(self, i, ec, r); });
    }

    // A quorum holds the lease and has counters at or above the token.
    void succeed(const std::shared_ptr<detail::redlock_core>& c)
    {
        if (completed())  // cancelled meanwhile: nobody will use the lease
            return fail(c, {}, milliseconds(-1));
        if (!ttl_left(sent, ttl, c ? c->drift(ttl) : ttl))  // took too long: what is left is no lock
            return fail(c, {}, milliseconds(-1));
        acquire_result res;
        res.acquired = true;
        res.fencing_token = fence;
        res.granted_ttl = ttl;
        complete({}, res);
    }

    static void on_raised(const std::shared_ptr<acquire_op>& self, std::size_t node, error_code ec,
                          const redis::reply& r)
    {
        auto& s = *self;
        ++s.raise_replies;
        if (s.decided)
            return;
        auto c = s.core.lock();
        bool held = false;
        (void)node;
        ec = detail::finish_script(ec, r, held, detail::decode_release, [](const std::string&) {});
        if (!ec)
            ++(held ? s.confirmed : s.not_held);
        s.note_failure(ec, c, r.is_error() ? r.str : std::string());
        auto outcome = tally(s.n, s.confirmed, s.not_held, s.n - s.raise_replies);
        if (outcome == vote::yes) {
            s.succeed(c);
        } else if (outcome == vote::no) {
            s.fail(c, {}, milliseconds(-1));  // the lease ended on too many nodes meanwhile
        } else if (outcome == vote::no_quorum) {
            s.fail(c, s.no_majority(c), milliseconds(-1));
        }
    }

    static bool ttl_left(clock_type::time_point sent, milliseconds ttl, milliseconds drift)
    {
        return clock_type::now() - sent < ttl - drift;
    }
};

struct renew_op : op_base<store::renew_signature> {
    using result_type = renew_result;
    using op_base::op_base;

    std::weak_ptr<detail::redlock_core> core;
    std::string key;
    std::size_t owned = 0, not_owned = 0;
    bool contended = false;
    bool decided_owned = false;

    static void on_reply(const std::shared_ptr<renew_op>& self, std::size_t node, error_code ec, const renew_result& r)
    {
        auto& s = *self;
        ++s.replies;
        auto c = s.core.lock();
        s.note_failure(ec, c, node);
        if (s.decided) {
            // The node cleared its flag as it reported it: if the decided result did not say
            // contended, the next renewal will.
            if (!ec && r.contended && s.decided_owned && !s.contended && c && c->late_contended.size() < 65536)
                c->late_contended.insert(s.key);
            return;
        }
        if (!ec) {
            s.owned += r.owned;
            s.not_owned += !r.owned;
            s.contended = s.contended || r.contended;
        }
        switch (tally(s.n, s.owned, s.not_owned, s.outstanding())) {
        case vote::pending: return;
        case vote::yes: s.decided_owned = true; return s.complete({}, renew_result{true, s.contended});
        case vote::no: return s.complete({}, renew_result{false, s.contended});
        case vote::no_quorum: return s.complete(s.no_majority(c), renew_result{});
        }
    }
};

struct release_op : op_base<store::bool_signature> {
    using result_type = bool;
    using op_base::op_base;

    std::weak_ptr<detail::redlock_core> core;
    std::size_t released = 0, not_released = 0, failed = 0;
    bool forced = false;  // force_release: waits for every node, true if any held it
    bool any = false;

    static void on_reply(const std::shared_ptr<release_op>& self, std::size_t node, error_code ec, bool ok)
    {
        auto& s = *self;
        ++s.replies;
        if (s.decided)
            return;
        s.note_failure(ec, s.core.lock(), node);
        if (ec)
            ++s.failed;
        else {
            s.released += ok;
            s.not_released += !ok;
            s.any = s.any || ok;
        }
        auto c = s.core.lock();
        std::size_t q = s.n / 2 + 1;
        if (s.forced) {
            if (s.outstanding() > 0)
                return;
            if (s.failed > s.n - q || !c || c->closed)
                return s.complete(s.no_majority(c), false);
            return s.complete({}, s.any);
        }
        switch (tally(s.n, s.released, s.not_released, s.outstanding())) {
        case vote::pending: return;
        case vote::yes: return s.complete({}, true);
        case vote::no: return s.complete({}, false);
        case vote::no_quorum: return s.complete(s.no_majority(c), false);
        }
    }
};

struct status_op : op_base<store::status_signature> {
    using result_type = lock_status;
    using op_base::op_base;

    std::weak_ptr<detail::redlock_core> core;
    std::vector<lock_status> answers;

    static void on_reply(const std::shared_ptr<status_op>& self, error_code ec, lock_status st)
    {
        auto& s = *self;
        ++s.replies;
        if (!ec)
            s.answers.push_back(std::move(st));
        if (s.outstanding() > 0 || s.decided)
            return;
        auto c = s.core.lock();
        std::size_t q = s.n / 2 + 1;
        if (s.answers.size() < q || !c || c->closed)
            return s.complete(quorum_error(c), lock_status{});
        lock_status out;
        out.key = s.answers.front().key;  // every node names the same key
        for (auto& a : s.answers)
            out.last_fencing_token = std::max(out.last_fencing_token, a.last_fencing_token);
        for (auto& a : s.answers) {
            if (!a.held)
                continue;
            std::vector<long long> ttls;
            std::uint64_t fence = 0;
            for (auto& b : s.answers) {
                if (b.held && b.holder == a.holder) {
                    ttls.push_back(b.ttl.count() < 0 ? std::numeric_limits<long long>::max() : b.ttl.count());
                    fence = std::max(fence, b.fencing_token);
                }
            }
            if (ttls.size() < q)
                continue;
            // A quorum holds it until its q-th longest node lease ends.
            std::sort(ttls.begin(), ttls.end(), std::greater<>());
            out.held = true;
            out.holder = a.holder;
            out.fencing_token = fence;
            out.ttl =
                ttls[q - 1] == std::numeric_limits<long long>::max() ? milliseconds(-1) : milliseconds(ttls[q - 1]);
            break;
        }
        s.complete({}, std::move(out));
    }
};

}  // namespace

redlock_store::redlock_store(asio::any_io_executor ex, std::vector<redis::config> nodes, std::string ns,
                             redlock_options opts)
{
    if (nodes.empty())
        throw std::invalid_argument("dlock::redlock_store needs at least one node");
    core_ = std::make_shared<detail::redlock_core>(ex, std::move(nodes), ns, opts);
    core_->keep_text = [this](std::string text) { set_error_text(std::move(text)); };
}

redlock_store::~redlock_store()
{
    core_->keep_text = nullptr;
}

asio::any_io_executor redlock_store::get_executor() const
{
    return core_->ex;
}
std::size_t redlock_store::size() const noexcept
{
    return core_->n;
}
std::size_t redlock_store::quorum() const noexcept
{
    return core_->q;
}
milliseconds redlock_store::drift(milliseconds ttl) const noexcept
{
    return core_->drift(ttl);
}
redis_store& redlock_store::node(std::size_t i)
{
    return *core_->nodes.at(i);
}

store_traits redlock_store::traits() const noexcept
{
    store_traits t;
    t.max_ttl = detail::redis_max_ttl;
    // A node restarted without its data can repeat a token (see the class comment).
    t.durable_fencing = false;
    return t;
}

std::string redlock_store::describe() const
{
    return "redlock " + std::to_string(core_->n) + " nodes: " + core_->address;
}

void redlock_store::close()
{
    core_->closed = true;
    for (auto& node : core_->nodes)
        node->close();
}

// Every node is tried at once; a quorum must connect. The failures' reasons, per node, go
// to last_error_text().
void redlock_store::do_connect(asio::any_completion_handler<connect_signature> h)
{
    struct connect_op {
        detail::stored_handler<connect_signature> h;
        std::size_t ok = 0, replies = 0;
        std::string detail;
    };
    auto& c = *core_;
    auto op = std::make_shared<connect_op>();
    op->h = std::move(h);
    for (std::size_t i = 0; i < c.n; ++i)
        c.nodes[i]->async_connect([this, alive = lifetime(), op, i, n = c.n, q = c.q](error_code ec) {
            ++op->replies;
            if (!ec)
                ++op->ok;
            else
                op->detail += (op->detail.empty() ? "" : "; ") + std::string("node ") + std::to_string(i + 1) + ": " +
                              ec.message();
            if (op->replies < n)
                return;
            if (op->ok < q && !alive.expired())
                set_error_text(op->detail);
            std::move(op->h)(op->ok >= q ? error_code() : error_code(error::no_quorum));
        });
}

void redlock_store::do_try_acquire(const lease_request& req, asio::any_completion_handler<acquire_signature> h)
{
    auto& c = *core_;
    if (req.kind != lease_kind::mutex)
        return detail::post_completion(c.ex, std::move(h), error_code(error::not_supported), acquire_result{});
    if (!detail::valid_redis_ttl(req.ttl))
        return detail::post_completion(c.ex, std::move(h), error_code(error::invalid_lease), acquire_result{});
    auto op = std::make_shared<acquire_op>(c.ex, std::move(h), c.n);
    op->core = core_;
    op->name = req.name;
    op->token = req.token;
    op->ttl = req.ttl;
    acquire_op::arm_cancellation(op);
    op->sent = clock_type::now();  // the leases start counting no earlier than this
    for (std::size_t i = 0; i < c.n; ++i)
        c.nodes[i]->async_try_acquire(req.name, req.token, req.ttl,
                                      [op, i](error_code ec, acquire_result r) { acquire_op::on_grant(op, i, ec, r); });
}

void redlock_store::do_renew(const lease_key& key, milliseconds ttl, asio::any_completion_handler<renew_signature> h)
{
    auto& c = *core_;
    if (!detail::valid_redis_ttl(ttl))
        return detail::post_completion(c.ex, std::move(h), error_code(error::invalid_lease), renew_result{});
    auto op = std::make_shared<renew_op>(c.ex, std::move(h), c.n);
    op->core = core_;
    op->key = detail::redlock_core::lease_key(key.name, key.token);
    op->contended = c.late_contended.erase(op->key) > 0;
    renew_op::arm_cancellation(op);
    for (std::size_t i = 0; i < c.n; ++i)
        c.nodes[i]->async_renew(key, ttl, [op, i](error_code ec, renew_result r) { renew_op::on_reply(op, i, ec, r); });
}

void redlock_store::do_release(const lease_key& key, asio::any_completion_handler<bool_signature> h)
{
    auto& c = *core_;
    c.late_contended.erase(detail::redlock_core::lease_key(key.name, key.token));
    auto op = std::make_shared<release_op>(c.ex, std::move(h), c.n);
    op->core = core_;
    release_op::arm_cancellation(op);
    for (std::size_t i = 0; i < c.n; ++i)
        c.nodes[i]->async_release(key, [op, i](error_code ec, bool ok) { release_op::on_reply(op, i, ec, ok); });
}

void redlock_store::do_force_release(const std::string& name, lease_kind side,
                                     asio::any_completion_handler<bool_signature> h)
{
    auto& c = *core_;
    if (detail::one_side(side))  // no read-write locks here
        return detail::post_completion(c.ex, std::move(h), error_code(error::not_supported), false);
    auto op = std::make_shared<release_op>(c.ex, std::move(h), c.n);
    op->core = core_;
    op->forced = true;
    release_op::arm_cancellation(op);
    for (std::size_t i = 0; i < c.n; ++i)
        c.nodes[i]->async_force_release(name, [op, i](error_code ec, bool ok) { release_op::on_reply(op, i, ec, ok); });
}

void redlock_store::do_status(const std::string& name, asio::any_completion_handler<status_signature> h)
{
    auto& c = *core_;
    auto op = std::make_shared<status_op>(c.ex, std::move(h), c.n);
    op->core = core_;
    status_op::arm_cancellation(op);
    for (auto& node : c.nodes)
        node->async_status(name, [op](error_code ec, lock_status st) { status_op::on_reply(op, ec, std::move(st)); });
}

// Each node's store calls nothing after its unwatch(), and `active` covers a node callback
// that unwatches this watch while its siblings' calls are still to come.
store::watch_id redlock_store::watch(const std::string& name, const std::string& token, watch_callback cb)
{
    (void)token;  // no direct hand-off: a watch only hears releases
    auto& c = *core_;
    auto state = std::make_shared<detail::redlock_core::watch_state>();
    state->cb = std::move(cb);
    state->confirmed.assign(c.n, 0);
    detail::redlock_core::watch_entry entry;
    entry.state = state;
    std::size_t q = c.q;
    for (std::size_t i = 0; i < c.n; ++i) {
        entry.node_ids.push_back(c.nodes[i]->watch(name, [state, i, q](watch_event ev) {
            auto& s = *state;
            if (!s.active)
                return;
            if (ev == watch_event::released)
                return s.cb(ev, {});
            bool first = !s.confirmed[i];
            if (first) {
                s.confirmed[i] = 1;
                ++s.confirmed_count;
            }
            // Ready once a quorum listens: any holder's quorum shares a node with it, so the
            // holder's release is heard; until then a node's (re)confirmation changes nothing.
            if (!s.ready_sent) {
                if (s.confirmed_count >= q) {
                    s.ready_sent = true;
                    s.cb(watch_event::ready, {});
                }
            } else if (ev == watch_event::resync) {
                s.cb(watch_event::resync, {});
            }
        }));
    }
    auto id = c.next_watch++;
    c.watches.emplace(id, std::move(entry));
    return id;
}

void redlock_store::unwatch(watch_id id)
{
    auto& c = *core_;
    auto it = c.watches.find(id);
    if (it == c.watches.end())
        return;
    it->second.state->active = false;
    for (std::size_t i = 0; i < c.n; ++i)
        c.nodes[i]->unwatch(it->second.node_ids[i]);
    c.watches.erase(it);
}

// ---- node lists (parsed in redis/node_list.cpp) ----

bool parse_node_list(std::string_view text, std::vector<redis::config>& out, redis::config_error& err)
{
    return redis::parse_nodes(text, out, err);
}

bool parse_node_json(const boost::json::value& v, std::vector<redis::config>& out, redis::config_error& err)
{
    return redis::parse_nodes_json(v, out, err);
}

}  // namespace dlock
