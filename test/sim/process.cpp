// SPDX-License-Identifier: BSL-1.0
#include "process.hpp"

#include <dlock/error.hpp>

#include <boost/asio/error.hpp>

namespace dlock::sim {

using boost::system::error_code;
using detail::fsm_action;

struct process::incarnation {
    incarnation(const sim_settings& cfg, const recipe& r, lease_kind kind, std::uint64_t seed, std::string prefix)
        : rng(static_cast<std::uint32_t>(seed)), ctx{config(cfg, r, kind), stats, rng, std::move(prefix), token_seq},
          fsm(ctx)
    {
    }
    static detail::fsm_config config(const sim_settings& cfg, const recipe& r, lease_kind kind)
    {
        detail::fsm_config f;  // as lock_driver derives it from lock_config and the store's traits
        f.lease = cfg.lease;
        f.drift = cfg.no_drift_margin ? milliseconds(0) : cfg.lease / 100 + milliseconds(2);
        f.renew_every = cfg.lease / 3;
        f.backoff_min = milliseconds(5);
        f.backoff_max = milliseconds(1000);
        f.shared = kind == lease_kind::read;  // a process's readers share one lease
        r.configure(f);
        return f;
    }

    lock_stats stats;
    std::minstd_rand rng;
    std::uint64_t token_seq = 0;
    detail::fsm_context ctx;
    detail::lock_fsm fsm;
    std::vector<worker> workers;
    std::uint64_t next_id = 0, timer_gen = 0;
    // The connection: its number at the server, whether it is up, the requests in flight
    // (each with what to do if it fails), the delivery times that keep each way in order.
    int epoch = 0;
    bool up = false;
    std::map<std::uint64_t, std::function<void(error_code)>> in_flight;
    real_time to_server{0}, to_client{0}, pushed{0};  // pushed messages: a way of their own
    real_time server_busy{0};                         // the server is busy with this connection until then
    std::unique_ptr<recipe> store;                    // the store's recipe
};

process::process(shared_state& s, int id) : s_(s), id_(id)
{
    rate_ = 0.99 + 0.02 * s_.w.unit();  // within the drift bound the library assumes (1 %)
    offset_ns_ = s_.w.uniform(1, 1'000'000) * 1'000'000'000LL;
}

process::~process() = default;

std::string process::name() const
{
    return "p" + std::to_string(id_) + "." + std::to_string(generation_);
}

detail::time_point process::local_now() const
{
    auto ns = offset_ns_ + static_cast<std::int64_t>(rate_ * static_cast<double>(s_.w.now().count()));
    return detail::time_point(std::chrono::duration_cast<detail::clock_type::duration>(std::chrono::nanoseconds(ns)));
}

real_time process::real_of(detail::time_point t) const
{
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
    return real_time(static_cast<std::int64_t>(static_cast<double>(ns - offset_ns_) / rate_) + 1);
}

void process::start()
{
    crashed_ = false;
    ++generation_;
    auto r = s_.make_recipe(*this);
    inc_ = std::make_unique<incarnation>(s_.cfg, *r, kind(), s_.w.draw(), name() + "-");
    inc_->store = std::move(r);
    for (int i = 0; i < s_.cfg.workers; ++i)
        inc_->workers.push_back(worker{i});
    connect();
    for (auto& k : inc_->workers)
        think(k);
}

void process::as_process(std::function<void()> f)
{
    if (crashed_)
        return;
    if (paused_)
        return deferred_.push_back(std::move(f));
    f();
}

void process::pause(real_time d)
{
    if (paused_ || crashed_)
        return;
    ++s_.faults.pauses;
    s_.w.log(name() + " paused");
    paused_ = true;
    s_.w.after(d, [this, g = generation_] {
        if (g != generation_)
            return;
        s_.w.log(name() + " resumed");
        paused_ = false;
        auto todo = std::move(deferred_);
        deferred_.clear();
        for (auto& f : todo)
            as_process(std::move(f));
    });
}

void process::crash(real_time restart_after)
{
    if (crashed_)
        return;
    ++s_.faults.crashes;
    s_.w.log(name() + " crashed");
    crashed_ = true;
    paused_ = false;
    deferred_.clear();
    if (inc_)
        inc_->store->crashed(conn());
    inc_.reset();
    s_.w.after(restart_after, [this] { start(); });
}

void process::partition(real_time d)
{
    ++s_.faults.partitions;
    s_.w.log(name() + " partitioned");
    partitioned_until_ = std::max(partitioned_until_, s_.w.now() + d);
    drop_connection();
}

void process::stall_replies(real_time d)
{
    ++s_.faults.stalls;
    s_.w.log(name() + " replies stalled");
    stalled_until_ = std::max(stalled_until_, s_.w.now() + d);
}

// ---- the connection ----

real_time process::delay()
{
    if (s_.faults_on && s_.w.chance(0.03))
        return s_.w.ms(20, 150);
    return std::chrono::microseconds(s_.w.uniform(20, 1000));
}

void process::connect()
{
    if (!inc_ || inc_->up)
        return;
    // A connection needs a reply to its handshake: none comes through a stall.
    bool reachable =
        s_.w.now() >= partitioned_until_ && s_.w.now() >= s_.server_down_until && s_.w.now() >= stalled_until_;
    auto g = generation_;
    if (!reachable)
        return s_.w.after(milliseconds(20), [this, g] {
            if (g == generation_ && !crashed_)
                connect();
        });
    inc_->up = true;
    inc_->store->connected();
}

void process::drop_connection()
{
    if (!inc_ || !inc_->up)
        return;
    ++s_.faults.drops;
    inc_->store->disconnected(conn());
    ++inc_->epoch;
    inc_->up = false;
    inc_->server_busy = real_time(0);  // a new connection, a new backend
    fail_in_flight(error::connection_lost);
    auto g = generation_;
    s_.w.after(milliseconds(10), [this, g] {
        if (g == generation_ && !crashed_)
            connect();
    });
}

void process::fail_in_flight(error_code ec)
{
    auto failed = std::move(inc_->in_flight);
    inc_->in_flight.clear();
    for (auto& [id, f] : failed)
        as_process([f = std::move(f), ec] { f(ec); });
}

// `apply` runs at the server when the request arrives and returns what the client does with
// the reply; `failed` is told the error if the request fails (timeout, lost connection).
real_time process::statement_stall()
{
    if (!s_.faults_on || !s_.w.chance(0.1))
        return real_time(0);
    return s_.w.chance(0.8) ? s_.w.ms(10, 180) : s_.w.ms(200, 600);
}

void process::request(std::function<std::function<void()>()> apply, std::function<void(error_code)> failed)
{
    request(nullptr, std::move(apply), std::move(failed), real_time(0));
}

// The server takes a connection's requests one at a time, in order: one that stalls holds
// back those behind it on the connection (not a new connection's, nor the wait connections').
void process::request(std::function<void()> arrived, std::function<std::function<void()>()> apply,
                      std::function<void(error_code)> failed, real_time stall)
{
    send(
        [this, arrived, apply, stall](const reply_fn& reply) {
            auto& c = *inc_;  // the request arrived: its incarnation is alive
            if (stall == real_time(0) && c.server_busy <= s_.w.now()) {
                if (arrived)
                    arrived();
                return reply(apply());
            }
            auto start = std::max(s_.w.now(), c.server_busy);
            c.server_busy = start + stall;
            auto down = s_.server_down_until;
            s_.w.at(start, [this, arrived, apply, reply, stall, down] {
                if (s_.server_down_until != down)  // a restart meanwhile ended the statement
                    return;
                if (arrived)
                    arrived();
                s_.w.after(stall, [this, apply, reply, down] {
                    if (s_.server_down_until == down)
                        reply(apply());
                });
            });
        },
        std::move(failed), s_.cfg.request_timeout);
}

void process::request_deferred(std::function<void(const reply_fn&)> arrive, std::function<void(error_code)> failed,
                               real_time timeout)
{
    send(std::move(arrive), std::move(failed), timeout);
}

void process::send(std::function<void(const reply_fn&)> arrive, std::function<void(error_code)> failed,
                   real_time timeout)
{
    auto& c = *inc_;
    if (!c.up) {
        auto g = generation_;
        return s_.w.after(milliseconds(2), [this, g, failed] {
            if (g == generation_)
                as_process([failed] { failed(error::connect_failed); });
        });
    }
    auto id = ++c.next_id;
    c.in_flight[id] = std::move(failed);
    auto g = generation_, epoch = c.epoch;
    c.to_server = std::max(c.to_server, s_.w.now() + delay());
    // The server's reply, whenever it has one (whatever became of the client meanwhile).
    reply_fn reply = [this, g, epoch, id](std::function<void()> on_reply) {
        if (g != generation_ || !inc_ || inc_->epoch != epoch)
            return;
        if (s_.faults_on && s_.w.chance(0.01)) {
            ++s_.faults.lost_replies;
            return;  // applied, the reply lost
        }
        auto& c = *inc_;
        c.to_client = std::max(c.to_client, s_.w.now() + delay());
        s_.w.at(c.to_client, [this, g, epoch, id, on_reply] {
            if (g != generation_ || !inc_ || inc_->epoch != epoch || s_.w.now() < partitioned_until_ ||
                s_.w.now() < stalled_until_)
                return;
            as_process([this, epoch, id, on_reply] {
                if (!inc_ || inc_->epoch != epoch || !inc_->in_flight.erase(id))
                    return;
                on_reply();
            });
        });
    };
    s_.w.at(c.to_server, [this, g, epoch, arrive, reply] {
        bool gone = g != generation_ || crashed_ || !inc_ || inc_->epoch != epoch;
        if (gone || s_.w.now() < partitioned_until_ || s_.w.now() < s_.server_down_until)
            return;  // lost on the way: the client's timeout tells
        arrive(reply);
    });
    // No reply in time: the connection is reset, and everything in flight on it fails.
    s_.w.after(timeout, [this, g, epoch, id] {
        if (g != generation_ || !inc_ || inc_->epoch != epoch || !inc_->in_flight.count(id))
            return;
        auto f = std::move(inc_->in_flight[id]);
        inc_->in_flight.erase(id);
        as_process([f] { f(error::timeout); });
        drop_connection();
    });
}

void process::push(int conn, std::function<void(recipe&)> f)
{
    if (!inc_ || conn != this->conn())
        return;
    auto& c = *inc_;
    auto g = generation_, epoch = c.epoch;
    c.pushed = std::max(c.pushed, s_.w.now() + delay());
    s_.w.at(c.pushed, [this, g, epoch, f] {
        if (g != generation_ || !inc_ || inc_->epoch != epoch || s_.w.now() < partitioned_until_ ||
            s_.w.now() < stalled_until_)
            return;
        as_process([this, epoch, f] {
            if (inc_ && inc_->epoch == epoch)
                f(*inc_->store);
        });
    });
}

int process::conn() const
{
    // Unique across incarnations; the process is its last digit (schedule.cpp finds it so).
    return inc_ ? id_ + 10 * (generation_ * 10000 + inc_->epoch) : -1;
}

bool process::up() const
{
    return inc_ && inc_->up;
}

detail::lock_fsm& process::fsm()
{
    return inc_->fsm;
}

void process::later(real_time d, std::function<void()> f)
{
    s_.w.after(d, [this, g = generation_, f] {
        if (g == generation_)
            as_process(f);
    });
}

void process::at_local(detail::time_point at, std::function<void()> f)
{
    s_.w.at(real_of(at), [this, g = generation_, f] {
        if (g == generation_)
            as_process(f);
    });
}

// ---- the machine's actions, as lock_driver performs them ----

void process::step()
{
    std::vector<fsm_action> acts;
    acts.swap(inc_->fsm.actions());
    for (auto& a : acts) {
        if (!inc_)
            return;
        perform(a);
    }
}

void process::perform(const fsm_action& a)
{
    if (s_.w.verbose) {
        static const char* names[] = {"attempt",          "watch", "unwatch", "set_timer",
                                      "cancel_timer",     "renew", "release", "complete_waiter",
                                      "complete_release", "lost",  "event"};
        s_.w.log(name() + " action " + names[static_cast<int>(a.t)] + " " + a.token + (a.queue ? " queue" : "") +
                 (a.ec ? " ec=" + a.ec.message() : "") + " id=" + std::to_string(a.id) +
                 " state=" + std::to_string(static_cast<int>(inc_->fsm.state())));
    }
    auto& c = *inc_;
    switch (a.t) {
    case fsm_action::type::attempt: c.store->attempt(a); break;
    case fsm_action::type::renew: c.store->renew(a); break;
    case fsm_action::type::release: c.store->release(a); break;
    case fsm_action::type::watch: c.store->watch(a); break;
    case fsm_action::type::unwatch: c.store->unwatch(); break;
    case fsm_action::type::set_timer: {
        auto gen = ++c.timer_gen;
        auto g = generation_;
        s_.w.at(real_of(a.at), [this, g, gen] {
            if (g != generation_)
                return;
            as_process([this, gen] {
                if (!inc_ || inc_->timer_gen != gen)
                    return;
                inc_->fsm.on_timer(local_now());
                step();
            });
        });
        break;
    }
    case fsm_action::type::cancel_timer: ++c.timer_gen; break;
    case fsm_action::type::complete_waiter: {
        auto* k = by_waiter(a.id);
        if (!k)
            break;
        if (a.ec || a.hold == 0) {  // refused (a try), timed out, cancelled or failed
            k->ph = worker::phase::idle;
            think(*k);
            break;
        }
        check_exclusion(a.fence);
        k->ph = worker::phase::holding;
        k->hold = a.hold;
        k->fence = a.fence;
        k->counter_read = s_.chk.read_counter();
        // Fences increase in grant order among exclusive leases; shared ones are granted
        // side by side, and their notices may arrive in any order.
        if (exclusive())
            s_.chk.grant(name(), a.fence);
        else
            s_.chk.shared_grant();
        s_.w.log(name() + " w" + std::to_string(k->index) + " holds fence " + std::to_string(a.fence));
        auto d = draining_ || s_.w.chance(0.7) ? s_.w.ms(0, 50)
                 : s_.w.chance(0.85)           ? s_.w.ms(100, 600)
                                               : s_.w.ms(1500, 2500);  // past the lease: the watchdog's work
        k->hold_until = s_.w.now() + d;
        auto hold = a.hold;
        auto idx = k->index;
        s_.w.after(real_time(0), [this, idx, hold, g = generation_] {
            if (g == generation_ && inc_)
                as_process([this, idx, hold] {
                    if (inc_)
                        tick(inc_->workers[idx], hold);
                });
        });
        break;
    }
    case fsm_action::type::complete_release: {
        auto* k = by_release(a.id);
        if (!k)
            break;
        k->ph = worker::phase::idle;
        think(*k);
        break;
    }
    case fsm_action::type::lost: s_.w.log(name() + " told of a lost lease"); break;
    case fsm_action::type::event: break;
    }
}

// No other process may believe valid now (whether it can act or not) a lease this grant
// excludes: any, for a mutex or a writer; a writer's, for a reader; for a permit, as many
// as there are permits.
void process::check_exclusion(std::uint64_t fence)
{
    unsigned permits_believed = 0;
    for (auto* q : s_.processes) {
        auto other = q != this ? q->believed_lease() : std::nullopt;
        if (!other)
            continue;
        bool conflict = kind() == lease_kind::read     ? q->kind() != lease_kind::read
                        : kind() == lease_kind::permit ? ++permits_believed >= s_.cfg.permits
                                                       : true;
        if (conflict)
            s_.chk.violation("exclusion: " + name() + " was granted fence " + std::to_string(fence) + " while " +
                             q->name() + " believed its lease (fence " + std::to_string(other->first) + ") valid for " +
                             std::to_string(std::chrono::duration_cast<milliseconds>(other->second).count()) +
                             " ms more by its own clock" +
                             (kind() == lease_kind::permit ? " (" + std::to_string(permits_believed) + " others did)"
                                                           : std::string()));
    }
}

// ---- the workers ----

process::worker* process::by_waiter(std::uint64_t id)
{
    for (auto& k : inc_->workers)
        if (k.ph == worker::phase::waiting && k.waiter == id)
            return &k;
    return nullptr;
}

process::worker* process::by_release(std::uint64_t id)
{
    for (auto& k : inc_->workers)
        if (k.ph == worker::phase::releasing && k.release_id == id)
            return &k;
    return nullptr;
}

void process::think(worker& k)
{
    auto idx = k.index;
    s_.w.after(s_.w.ms(0, 20), [this, idx, g = generation_] {
        if (g == generation_ && inc_)
            as_process([this, idx] {
                if (inc_ && !draining_)
                    acquire(inc_->workers[idx]);
            });
    });
}

// A worker's acquire: 10 % a try (try_acquire), 15 % bounded (acquire_for: the bound's
// deadline is an input), and in the fault phase 10 % cancelled after a while.
void process::acquire(worker& k)
{
    k.ph = worker::phase::waiting;
    k.waiter = ++inc_->next_id;
    auto pick = s_.w.unit();
    inc_->fsm.on_acquire(k.waiter, 100 + static_cast<std::uint64_t>(k.index), pick < 0.1, local_now());
    if (pick >= 0.1 && pick < 0.25) {
        auto waiter = k.waiter;
        auto at = local_now() + s_.w.ms(0, 500);
        s_.w.at(real_of(at), [this, waiter, at, g = generation_] {
            if (g == generation_ && inc_)
                as_process([this, waiter, at] {
                    if (!inc_ || !by_waiter(waiter))
                        return;
                    inc_->fsm.on_deadline(waiter, std::max(at, local_now()));
                    step();
                });
        });
    }
    if (s_.faults_on && s_.w.chance(0.1)) {
        auto waiter = k.waiter;
        s_.w.after(s_.w.ms(0, 300), [this, waiter, g = generation_] {
            if (g == generation_ && inc_)
                as_process([this, waiter] {
                    if (!inc_ || !by_waiter(waiter))
                        return;
                    ++s_.faults.cancels;
                    inc_->fsm.on_cancel(waiter, boost::asio::error::operation_aborted, local_now());
                    step();
                });
        });
    }
    step();
}

// A holder writes while its lease is valid by its own clock, every 5 ms, until its hold ends.
void process::tick(worker& k, std::uint64_t hold)
{
    if (k.ph != worker::phase::holding || k.hold != hold)
        return;
    bool valid = local_now() < inc_->fsm.valid_until();
    if (valid && exclusive())
        s_.chk.write(name(), k.fence);
    if (!valid || s_.w.now() >= k.hold_until)
        return end_hold(k);
    auto idx = k.index;
    s_.w.after(milliseconds(5), [this, idx, hold, g = generation_] {
        if (g == generation_ && inc_)
            as_process([this, idx, hold] {
                if (inc_)
                    tick(inc_->workers[idx], hold);
            });
    });
}

void process::end_hold(worker& k)
{
    if (local_now() < inc_->fsm.valid_until() && exclusive())
        s_.chk.write_counter(name(), k.counter_read);
    k.ph = worker::phase::releasing;
    k.release_id = ++inc_->next_id;
    inc_->fsm.on_release(k.hold, k.release_id, local_now());
    step();
}

std::optional<std::pair<std::uint64_t, real_time>> process::believed_lease() const
{
    if (!inc_ || crashed_)
        return std::nullopt;
    for (const auto& k : inc_->workers)
        if (k.ph == worker::phase::holding && local_now() < inc_->fsm.valid_until())
            return std::pair{k.fence, real_of(inc_->fsm.valid_until()) - s_.w.now()};
    return std::nullopt;
}

std::string process::state() const
{
    if (!inc_)
        return "crashed";
    static const char* phases[] = {"idle", "waiting", "holding", "releasing"};
    std::string s = "fsm state " + std::to_string(static_cast<int>(inc_->fsm.state())) +
                    (inc_->fsm.idle() ? " idle" : " busy") + ", in flight " + std::to_string(inc_->fsm.in_flight()) +
                    ", waiters " + std::to_string(inc_->fsm.waiters()) + ", holds " + std::to_string(inc_->fsm.holds());
    for (auto& k : inc_->workers)
        s += std::string(", w") + std::to_string(k.index) + " " + phases[static_cast<int>(k.ph)];
    return s + "; " + inc_->store->state();
}

bool process::quiet() const
{
    if (crashed_ || !inc_)
        return true;
    for (auto& k : inc_->workers)
        if (k.ph != worker::phase::idle)
            return false;
    return inc_->fsm.idle() && inc_->store->idle();
}

}  // namespace dlock::sim
