// SPDX-License-Identifier: BSL-1.0
// One simulated client process: the real lock_fsm (src/core/lock_fsm.hpp) driven as
// lock_driver drives it, its store actions carried out by the store's recipe (recipe.hpp)
// over one simulated connection (requests and replies each in order, with delays, lost
// replies, timeouts, drops and partitions; pushed messages on a way of their own), on a
// local clock that runs at its own rate. Its workers take the lock, write to the fenced
// resource while they believe the lease valid, and release it. Pauses defer everything the
// process would do; a crash loses it all (the lease is left to expire at the server).
#pragma once

#include "checks.hpp"
#include "core/lock_fsm.hpp"
#include "recipe.hpp"
#include "world.hpp"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dlock::sim {

/// What a schedule's processes share: the settings, the server's state beyond the model.
struct sim_settings {
    milliseconds lease{1000};
    int workers = 2;
    bool no_drift_margin = false;  ///< broken: the machine takes no margin off its leases
    real_time request_timeout = milliseconds(200);
    /// What each process's lock is (by process number): a mutex, a read-write lock's reader
    /// or writer, or a semaphore's lane (one permit at a time, as semaphore_state's lanes).
    std::function<lease_kind(int)> kind_of = [](int) { return lease_kind::mutex; };
    unsigned permits = 1;           ///< a semaphore's
    bool writer_as_reader = false;  ///< broken: a writer's acquire asks the store for a read lease
};

struct fault_counts {
    std::uint64_t lost_replies = 0, drops = 0, partitions = 0, stalls = 0, pauses = 0, crashes = 0, restarts = 0,
                  cancels = 0;
};

class process;

struct shared_state {
    world& w;
    std::function<std::unique_ptr<recipe>(process&)> make_recipe;
    checks& chk;
    fault_counts& faults;
    const sim_settings& cfg;
    std::vector<process*> processes;  ///< every process of the schedule, for the exclusion check
    bool faults_on = true;            ///< lost replies and cancellations happen (the fault phase)
    real_time server_down_until{0};   ///< a restarting server takes no request before this
};

class process {
public:
    process(shared_state& s, int id);
    ~process();

    void start();
    /// Stops the process for `d`: nothing it would do happens before it resumes.
    void pause(real_time d);
    /// Kills the process; a new incarnation starts after `restart_after`.
    void crash(real_time restart_after);
    /// Cuts its connection both ways for `d` (requests and replies in flight are lost).
    void partition(real_time d);
    /// For `d`, requests still reach the server but nothing comes back (a proxy or a
    /// half-broken route holding the replies back): the server hears the process, it does not.
    void stall_replies(real_time d);
    /// The connection breaks (a reset, or the server restarting).
    void drop_connection();
    /// A message the server pushes to the connection `conn` (a publish, a watch event): on
    /// the pushed way, then `f` with the recipe, if `conn` is still the process's.
    void push(int conn, std::function<void(recipe&)> f);
    /// No new acquires from now on (the drain phase).
    void drain() { draining_ = true; }
    /// Nothing waiting, held or in flight, and the machine idle.
    bool quiet() const;
    std::string name() const;
    /// What this process's lock is (sim_settings::kind_of).
    lease_kind kind() const { return s_.cfg.kind_of(id_); }
    /// Its leases exclude every other (a mutex's, a writer's): it writes to the fenced
    /// resource and the counter. Readers and permits only hold.
    bool exclusive() const { return kind() == lease_kind::mutex || kind() == lease_kind::write; }
    /// The workers', the machine's and the recipe's state, for a liveness report.
    std::string state() const;
    /// A worker holds and the lease is valid by this process's own clock: the fence, and how
    /// long it still believes it valid (nothing if it holds nothing it believes valid).
    std::optional<std::pair<std::uint64_t, real_time>> believed_lease() const;

    // ---- for the recipes ----
    shared_state& shared() noexcept { return s_; }
    world& w() noexcept { return s_.w; }
    detail::lock_fsm& fsm();
    /// The connection's number at the server (the process and its epoch), and whether it is up.
    int conn() const;
    bool up() const;
    // The local clock, and real time from a local time point.
    detail::time_point local_now() const;
    real_time real_of(detail::time_point t) const;
    // Runs `f` as the process (deferred while paused, dropped after a crash of its incarnation).
    void as_process(std::function<void()> f);
    /// Runs `f` as the process when its clock reaches `at`, or after `d`, unless it crashed
    /// meanwhile (this incarnation's recipe is gone then).
    void at_local(detail::time_point at, std::function<void()> f);
    void later(real_time d, std::function<void()> f);
    void step();  // performs the machine's actions
    /// How long the server stalls a SQL statement mid-way (a backend stopped): now and then in
    /// the fault phase, mostly within the request's timeout (the late reply is heard), else past it.
    real_time statement_stall();
    /// Sends a request: `apply` runs at the server when it arrives and returns what the
    /// process does with the reply; `failed` is told the error if it fails.
    void request(std::function<std::function<void()>()> apply, std::function<void(boost::system::error_code)> failed);
    /// The same with the server stalled for `stall` between the request's arrival (`arrived`
    /// runs then) and its application (a backend stopped mid-statement).
    void request(std::function<void()> arrived, std::function<std::function<void()>()> apply,
                 std::function<void(boost::system::error_code)> failed, real_time stall);
    /// What the server calls with what the client does with its reply.
    using reply_fn = std::function<void(std::function<void()>)>;
    /// A request the server answers when it can (a blocking GET_LOCK): `arrive` runs when it
    /// arrives and calls `reply` then or later; no reply within `timeout` fails it.
    void request_deferred(std::function<void(const reply_fn&)> arrive,
                          std::function<void(boost::system::error_code)> failed, real_time timeout);

private:
    struct incarnation;
    struct worker {
        int index = 0;
        enum class phase {
            idle,
            waiting,
            holding,
            releasing
        } ph = phase::idle;
        std::uint64_t waiter = 0, hold = 0, fence = 0, release_id = 0, counter_read = 0;
        real_time hold_until{0};
    };

    void perform(const detail::fsm_action& a);
    // At a grant of `fence`: no other process believes valid a lease this one excludes.
    void check_exclusion(std::uint64_t fence);

    // The connection. A message's delay: mostly under a millisecond, sometimes long (a
    // stalled network or server), each way kept in order.
    real_time delay();
    void connect();
    void send(std::function<void(const reply_fn&)> arrive, std::function<void(boost::system::error_code)> failed,
              real_time timeout);
    void fail_in_flight(boost::system::error_code ec);

    // The workers.
    void think(worker& k);
    void acquire(worker& k);
    void tick(worker& k, std::uint64_t hold);
    void end_hold(worker& k);
    worker* by_waiter(std::uint64_t id);
    worker* by_release(std::uint64_t id);

    shared_state& s_;
    int id_;
    int generation_ = 0;  // incarnations
    double rate_ = 1.0;
    std::int64_t offset_ns_ = 0;
    bool paused_ = false, crashed_ = false, draining_ = false;
    real_time partitioned_until_{0}, stalled_until_{0};
    std::vector<std::function<void()>> deferred_;
    std::unique_ptr<incarnation> inc_;
};

}  // namespace dlock::sim
