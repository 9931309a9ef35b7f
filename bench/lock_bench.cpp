// SPDX-License-Identifier: BSL-1.0
/*
 * lock_bench: what the lock costs, as ratios to floors measured in the same run (issue 16;
 * the goals and what each case measures: bench/README.md).
 *
 * One throwaway redis-server on a free loopback port; the floors:
 *   raw_ping_rtt, raw_idle_ping_rtt   PING over a blocking socket, hot and after 3 ms idle
 *   raw_lua_pipelined_ceiling  the lock's scripts sent raw and kept pipelined: one connection's most
 *   minimal_floor              SET NX PX + compare-and-delete by hand, blocking socket (and its CPU)
 *   asio_floor                 the same two commands over an Asio socket from a coroutine
 *   raw_uncontended_floor      dlock's own two scripts over a blocking socket
 *   raw_cross_process_floor    dlock's hand-off protocol over blocking sockets, two processes
 *   timer_1ms_sections_ceiling 1 ms timer waits back to back
 * and the library's cases against them: uncontended_acquire_release (+ its client CPU),
 * cluster3 / redlock3 uncontended, distinct_names_64, local_handoff_16 (+ on the memory
 * store), cross_process_handoff, two_process_sections_16; --scale: 100,000 held locks.
 * Options: --json, --quick, --smoke (tiny counts, seconds: what ctest runs), --awake (a
 * lowest-priority spinner per CPU, so that no CPU halts between round trips: the figures
 * then show the work, not a VM's wake-ups),
 * --scale, --profile-uncontended, --profile-distinct. Peers are this program started again
 * with --peer.
 * Timer slack is 1 ns (prctl) here and in the peers; every phase runs under
 * io_context::run_for (120 s) only to turn a bug into an error instead of a hang.
 */
#include <dlock/dlock.hpp>

#include "common.hpp"
#include "common/child.hpp"
#include "common/redis_cluster.hpp"
#include "common/redis_server.hpp"
#include "redis/redis_scripts.hpp"
#include "redis/resp/decoder.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using bench::clock_type;
using bench::now_ns;

namespace {

dlock::redis::config config_for(std::uint16_t port)
{
    dlock::redis::config c;
    c.port = port;
    return c;
}

double cpu_seconds()
{
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// Runs the coroutine `body` on `io` under a 120 s cap; rethrows its exception, and fails
// loudly if it did not finish (a bug, not a slow machine).
void run_phase(asio::io_context& io, std::function<asio::awaitable<void>()> body, const std::string& phase)
{
    std::exception_ptr error;
    bool done = false;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            co_await body();
            done = true;
        },
        [&](std::exception_ptr e) { error = e; });
    io.run_for(120s);
    if (error)
        std::rethrow_exception(error);
    if (!done)
        throw std::runtime_error("the " + phase + " phase did not finish within 120 s");
}

// Runs `body` on a fresh io_context with a connected redis_store, closed afterwards.
template <class Body>
void with_store(std::uint16_t port, Body body)
{
    asio::io_context io;
    dlock::redis_store store(io.get_executor(), config_for(port));
    run_phase(
        io,
        [&]() -> asio::awaitable<void> {
            co_await store.connection().async_connect();
            co_await body(io, store);
            store.close();
        },
        "benchmark");
}

// The lock's own scripts over blocking sockets, no library: the floor under the lock's
// figures on this machine (the same round trips and wake-ups, nothing else).
class raw_client {
public:
    explicit raw_client(std::uint16_t port) : sock_(port) {}
    int fd() const noexcept { return sock_.fd(); }
    void send(const dlock::redis::request& r)
    {
        const auto& p = r.payload();
        if (::write(sock_.fd(), p.data(), p.size()) != ssize_t(p.size()))
            throw std::runtime_error("raw write failed");
    }
    // The next reply, blocking.
    dlock::redis::reply next()
    {
        boost::system::error_code ec;
        for (;;) {
            if (auto r = dec_.next(ec))
                return std::move(*r);
            if (ec)
                throw std::runtime_error("raw decode failed");
            char buf[4096];
            ssize_t n = ::read(sock_.fd(), buf, sizeof buf);
            if (n <= 0)
                throw std::runtime_error("raw read failed");
            dec_.feed({buf, std::size_t(n)});
        }
    }
    // Drops whatever has already arrived (stale release messages), without blocking.
    void drain()
    {
        char buf[4096];
        while (::recv(sock_.fd(), buf, sizeof buf, MSG_DONTWAIT) > 0) {
        }
        dec_.reset();
    }

private:
    bench::raw_pinger sock_;
    dlock::resp::decoder dec_;
};

// The release script's request, as redis_store sends it: after a PING in the same write
// (script_args::ping_first), two replies.
void push_release(dlock::redis::request& req, const dlock::redis::script& rel, const dlock::redis_store& keys,
                  const std::string& name, const std::string& token)
{
    req.push("PING");
    req.push("EVALSHA", rel.sha1(), 4, keys.lock_key(name), keys.fence_key(name), keys.queue_key(name),
             keys.queue_ttl_key(name), token, keys.channel(name), keys.grant_channel(name, ""));
}

// The lock's scripts, sent raw and kept pipelined: the server's ceiling for acquire+release
// on one connection. Batches of 16 acquire+release pairs (as `redis-benchmark -P 16`) over
// 64 names; up to 4 batches in flight, written while replies are read (poll), so the server
// never idles waiting for the client, as it did when each batch waited for its replies.
double raw_lua_ceiling(std::uint16_t port, int cycles)
{
    asio::io_context io;
    dlock::redis_store keys(io.get_executor(), config_for(port));  // only for key names
    dlock::redis::script acq(dlock::scripts::acquire), rel(dlock::scripts::release);
    raw_client c(port);
    dlock::redis::request load;
    load.push("SCRIPT", "LOAD", acq.body());
    load.push("SCRIPT", "LOAD", rel.body());
    c.send(load);
    c.next();
    c.next();
    constexpr int names = 64, per_batch = 16, window = 4;
    std::vector<std::string> batches;  // batch i covers names [16 i, 16 i + 16)
    for (int b = 0; b < names / per_batch; ++b) {
        dlock::redis::request req;
        for (int i = 0; i < per_batch; ++i) {
            auto n = "dlock:ceiling" + std::to_string(b * per_batch + i);
            // As redis_store sends it: the queue keys too (a free name serves earlier waiters first).
            req.push("EVALSHA", acq.sha1(), 4, keys.lock_key(n), keys.fence_key(n), keys.queue_key(n),
                     keys.queue_ttl_key(n), "tok", 30000, 0, keys.grant_channel(n, ""));
            push_release(req, rel, keys, n, "tok");
        }
        batches.push_back(req.payload());
    }
    int fd = c.fd();
    int flags = ::fcntl(fd, F_GETFL, 0);
    ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    dlock::resp::decoder dec;
    long sent_batches = 0, replies = 0;
    const long total_batches = (cycles + per_batch - 1) / per_batch, total_replies = total_batches * per_batch * 3;
    std::string out;
    std::size_t out_at = 0;
    auto t0 = clock_type::now();
    while (replies < total_replies) {
        long in_flight = sent_batches - replies / (3 * per_batch);  // 3: acquire, PING, release
        if (out_at == out.size() && in_flight < window && sent_batches < total_batches) {
            out = batches[std::size_t(sent_batches % long(batches.size()))];
            out_at = 0;
            ++sent_batches;
        }
        pollfd p{fd, short(POLLIN | (out_at < out.size() ? POLLOUT : 0)), 0};
        if (::poll(&p, 1, 5000) <= 0)
            throw std::runtime_error("ceiling: the server stopped answering");
        if ((p.revents & POLLOUT) && out_at < out.size()) {
            ssize_t n = ::write(fd, out.data() + out_at, out.size() - out_at);
            if (n > 0)
                out_at += std::size_t(n);
        }
        if (p.revents & (POLLIN | POLLERR | POLLHUP)) {
            char buf[65536];
            ssize_t n = ::read(fd, buf, sizeof buf);
            if (n <= 0)
                throw std::runtime_error("ceiling: read failed");
            dec.feed({buf, std::size_t(n)});
            boost::system::error_code ec;
            while (auto r = dec.next(ec)) {
                if (r->is_error())
                    throw std::runtime_error("ceiling: " + r->str);
                ++replies;
            }
            if (ec)
                throw std::runtime_error("ceiling: decode failed");
        }
    }
    double s = std::chrono::duration<double>(clock_type::now() - t0).count();
    ::fcntl(fd, F_SETFL, flags);
    return double(total_batches * per_batch) / s;
}

// acquire + release, one after the other, over one blocking socket.
// `samples` acquire/release cycles sent raw and answered one at a time, after `warmup`;
// `cpu_us` gets the client CPU per measured cycle.
std::vector<double> raw_cycles(raw_client& c, const dlock::redis::request& acquire,
                               const dlock::redis::request& release, int warmup, int samples, double& cpu_us)
{
    std::vector<double> lat;
    double cpu0 = cpu_seconds();
    for (int i = 0; i < samples + warmup; ++i) {
        if (i == warmup)
            cpu0 = cpu_seconds();
        auto t0 = clock_type::now();
        c.send(acquire);
        c.next();
        c.send(release);
        for (std::size_t k = 0; k < release.size(); ++k)  // dlock's: a PING's reply, then the release's
            c.next();
        if (i >= warmup)
            lat.push_back(bench::us_since(t0));
    }
    cpu_us = (cpu_seconds() - cpu0) * 1e6 / samples;
    return lat;
}

std::vector<double> raw_uncontended(std::uint16_t port, int warmup, int samples, double& cpu_us)
{
    asio::io_context io;
    dlock::redis_store keys(io.get_executor(), config_for(port));  // only for key names
    dlock::redis::script acq(dlock::scripts::acquire), rel(dlock::scripts::release);
    raw_client c(port);
    dlock::redis::request load;
    load.push("SCRIPT", "LOAD", acq.body());
    load.push("SCRIPT", "LOAD", rel.body());
    c.send(load);
    c.next();
    c.next();
    const std::string name = "dlock:bench:raw-solo";
    dlock::redis::request a, r;
    a.push("EVALSHA", acq.sha1(), 4, keys.lock_key(name), keys.fence_key(name), keys.queue_key(name),
           keys.queue_ttl_key(name), "tok", 30000, 0, keys.grant_channel(name, ""));
    push_release(r, rel, keys, name, "tok");
    return raw_cycles(c, a, r, warmup, samples, cpu_us);
}

// The cheapest correct lock a C++ user could write by hand (issue 16's floor): SET NX PX,
// then a compare-and-delete script, over a blocking socket. No fencing, no watchdog, no
// hand-off. `cpu_us` gets the client CPU per cycle.
std::vector<double> minimal_floor(std::uint16_t port, int warmup, int samples, double& cpu_us)
{
    static constexpr char cad[] =
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
    dlock::redis::script del(cad);
    raw_client c(port);
    dlock::redis::request load;
    load.push("SCRIPT", "LOAD", del.body());
    c.send(load);
    c.next();
    dlock::redis::request a, r;
    a.push("SET", "bench:minimal", "tok", "NX", "PX", 30000);
    r.push("EVALSHA", del.sha1(), 1, "bench:minimal", "tok");
    return raw_cycles(c, a, r, warmup, samples, cpu_us);
}

// One Asio socket to the server and its decoder: a request, then its next reply.
class asio_client {
public:
    explicit asio_client(asio::io_context& io) : sock_(io) {}
    asio::awaitable<void> connect(std::uint16_t port)
    {
        co_await sock_.async_connect({asio::ip::make_address("127.0.0.1"), port}, asio::use_awaitable);
        sock_.set_option(asio::ip::tcp::no_delay(true));
    }
    asio::awaitable<void> send(const dlock::redis::request& r)
    {
        co_await asio::async_write(sock_, asio::buffer(r.payload()), asio::use_awaitable);
    }
    asio::awaitable<dlock::redis::reply> next()
    {
        boost::system::error_code ec;
        for (;;) {
            if (auto r = dec_.next(ec))
                co_return std::move(*r);
            if (ec)
                throw std::runtime_error("asio client: decode failed");
            auto n = co_await sock_.async_read_some(asio::buffer(buf_), asio::use_awaitable);
            dec_.feed({buf_.data(), n});
        }
    }

private:
    asio::ip::tcp::socket sock_;
    dlock::resp::decoder dec_;
    std::array<char, 4096> buf_;
};

// The minimal floor's two commands over an Asio socket from a coroutine, as an event-loop
// program with no lock library sends them: the floor's blocking reads become epoll waits
// and handler hops. dlock pays those too, so this shows how much of its cost is its own.
std::vector<double> asio_floor(std::uint16_t port, int warmup, int samples, double& cpu_us)
{
    asio::io_context io;
    std::vector<double> lat;
    double cpu0 = cpu_seconds();
    run_phase(
        io,
        [&]() -> asio::awaitable<void> {
            static constexpr char cad[] =
                "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
            dlock::redis::script del(cad);
            asio_client c(io);
            co_await c.connect(port);
            auto round_trip = [&](const dlock::redis::request& q) -> asio::awaitable<void> {
                co_await c.send(q);
                if (auto reply = co_await c.next(); reply.is_error())
                    throw std::runtime_error("asio floor: " + reply.str);
            };
            dlock::redis::request load, a, r;
            load.push("SCRIPT", "LOAD", del.body());
            co_await round_trip(load);
            a.push("SET", "bench:asio-floor", "tok", "NX", "PX", 30000);
            r.push("EVALSHA", del.sha1(), 1, "bench:asio-floor", "tok");
            for (int i = 0; i < samples + warmup; ++i) {
                if (i == warmup)
                    cpu0 = cpu_seconds();
                auto t0 = clock_type::now();
                co_await round_trip(a);
                co_await round_trip(r);
                if (i >= warmup)
                    lat.push_back(bench::us_since(t0));
            }
            cpu_us = (cpu_seconds() - cpu0) * 1e6 / samples;
        },
        "asio floor");
    return lat;
}

// --awake: one spinning process per CPU at the lowest priority for the whole run, so that
// no CPU halts between round trips. On a VM whose idle vCPUs halt (no guest halt-polling),
// waking one costs tens of microseconds and dominates every idle-machine figure; with the
// spinners the figures show the work itself (they yield to any real task at once).
struct spinners {
    std::vector<pid_t> pids;
    explicit spinners(bool on)
    {
        if (!on)
            return;
        long n = ::sysconf(_SC_NPROCESSORS_ONLN);
        for (long i = 0; i < n; ++i) {
            pid_t p = ::fork();
            if (p == 0) {
                ::setpriority(PRIO_PROCESS, 0, 19);
                for (;;)
                    asm volatile("" ::: "memory");  // spin: the loop must not be optimized away
            }
            if (p > 0)
                pids.push_back(p);
        }
    }
    ~spinners()
    {
        for (auto p : pids)
            ::kill(p, SIGKILL);
        for (auto p : pids)
            ::waitpid(p, nullptr, 0);
    }
};

// --peer rawpingpong PORT ROUNDS: the pingpong peer over blocking sockets, with the lock's
// protocol: listen on the token's grant channel, try the acquire script queued, and on
// refusal block until the holder's release hands the name over.
int raw_pingpong_peer(std::uint16_t port, int rounds)
{
    asio::io_context io;
    dlock::redis_store keys(io.get_executor(), config_for(port));
    dlock::redis::script acq(dlock::scripts::acquire), rel(dlock::scripts::release);
    const std::string name = "dlock:bench:rawpingpong";
    const std::string token = "raw-" + std::to_string(::getpid());
    raw_client cmd(port), sub(port);
    dlock::redis::request s;
    s.push("SUBSCRIBE", keys.grant_channel(name, token));
    sub.send(s);
    sub.next();  // confirmed: from now on no hand-off goes unseen
    dlock::redis::request load;
    load.push("SCRIPT", "LOAD", acq.body());
    load.push("SCRIPT", "LOAD", rel.body());
    cmd.send(load);
    cmd.next();
    cmd.next();
    dlock::redis::request a, r;
    a.push("EVALSHA", acq.sha1(), 4, keys.lock_key(name), keys.fence_key(name), keys.queue_key(name),
           keys.queue_ttl_key(name), token, 30000, 1, keys.grant_channel(name, ""));
    push_release(r, rel, keys, name, token);
    std::ostringstream out;
    for (int i = 0; i < rounds; ++i) {
        cmd.send(a);
        auto reply = cmd.next();
        if (!(reply.elements.size() == 2 && reply.elements[0].integer == 1))
            sub.next();  // the hand-off
        out << "acq " << now_ns() << "\n";
        ::usleep(3000);
        out << "rel " << now_ns() << "\n";
        cmd.send(r);
        cmd.next();  // PING
        cmd.next();
        ::usleep(1000);
    }
    std::cout << out.str() << "done" << std::endl;
    return 0;
}

// --peer asiopingpong PORT ROUNDS: rawpingpong's protocol over Asio sockets from a
// coroutine, no library: the hand-off floor of an event-loop program (epoll waits, a
// speculative read per reply), which dlock pays too.
int asio_pingpong_peer(std::uint16_t port, int rounds)
{
    asio::io_context io(1);
    std::ostringstream out;
    run_phase(
        io,
        [&]() -> asio::awaitable<void> {
            dlock::redis_store keys(io.get_executor(), config_for(port));
            dlock::redis::script acq(dlock::scripts::acquire), rel(dlock::scripts::release);
            const std::string name = "dlock:bench:asiopingpong";
            const std::string token = "asio-" + std::to_string(::getpid());
            asio_client cmd(io), sub(io);
            co_await cmd.connect(port);
            co_await sub.connect(port);
            dlock::redis::request s, load, a, r;
            s.push("SUBSCRIBE", keys.grant_channel(name, token));
            co_await sub.send(s);
            co_await sub.next();
            load.push("SCRIPT", "LOAD", acq.body());
            load.push("SCRIPT", "LOAD", rel.body());
            co_await cmd.send(load);
            co_await cmd.next();
            co_await cmd.next();
            a.push("EVALSHA", acq.sha1(), 4, keys.lock_key(name), keys.fence_key(name), keys.queue_key(name),
                   keys.queue_ttl_key(name), token, 30000, 1, keys.grant_channel(name, ""));
            push_release(r, rel, keys, name, token);
            asio::steady_timer t(io);
            for (int i = 0; i < rounds; ++i) {
                co_await cmd.send(a);
                auto reply = co_await cmd.next();
                if (!(reply.elements.size() == 2 && reply.elements[0].integer == 1))
                    co_await sub.next();  // the hand-off
                out << "acq " << now_ns() << "\n";
                t.expires_after(3ms);
                co_await t.async_wait(asio::use_awaitable);
                out << "rel " << now_ns() << "\n";
                co_await cmd.send(r);
                co_await cmd.next();  // PING
                co_await cmd.next();
                t.expires_after(1ms);
                co_await t.async_wait(asio::use_awaitable);
            }
        },
        "asio pingpong");
    std::cout << out.str() << "done" << std::endl;
    return 0;
}

// The uncontended cycle on any store (closed afterwards), under a 120 s cap.
template <class Store>
std::vector<double> uncontended_on(asio::io_context& io, Store& store, int samples, const char* phase,
                                   double* cpu_us = nullptr, int warmup = 500)
{
    std::vector<double> lat;
    double cpu0 = cpu_seconds();
    run_phase(
        io,
        [&]() -> asio::awaitable<void> {
            {
                dlock::registry reg(store);
                auto lock = reg.obtain("bench:solo");
                for (int i = 0; i < samples + warmup; ++i) {
                    if (i == warmup)
                        cpu0 = cpu_seconds();
                    auto t0 = clock_type::now();
                    auto g = co_await lock.acquire();
                    co_await g.release();
                    if (i >= warmup)
                        lat.push_back(bench::us_since(t0));
                }
                if (cpu_us)
                    *cpu_us = (cpu_seconds() - cpu0) * 1e6 / samples;
            }
            store.close();
        },
        phase);
    return lat;
}

// The uncontended cycle on one redis_store.
std::vector<double> uncontended(std::uint16_t port, int warmup, int samples, double& cpu_us)
{
    asio::io_context io(1);
    dlock::redis_store store(io.get_executor(), config_for(port));
    return uncontended_on(io, store, samples, "uncontended", &cpu_us, warmup);
}

// The uncontended cycle on a redlock_store over `nodes`.
std::vector<double> uncontended_redlock(std::vector<dlock::redis::config> nodes, int samples)
{
    asio::io_context io;
    dlock::redlock_store store(io.get_executor(), std::move(nodes));
    return uncontended_on(io, store, samples, "redlock");
}

// `coroutines` coroutines each run `per_coroutine` acquire+release cycles on the lock
// `name_of(c)`; returns cycles/s and, in `handed_off`, the registry's local hand-offs.
template <class NameOf>
double cycle_rate(std::uint16_t port, int coroutines, int per_coroutine, NameOf name_of,
                  std::uint64_t* handed_off = nullptr)
{
    double rate = 0;
    with_store(port, [&](asio::io_context& io, dlock::redis_store& store) -> asio::awaitable<void> {
        dlock::registry reg(store);
        int finished = 0;
        asio::steady_timer all_done(io, clock_type::time_point::max());
        auto t0 = clock_type::now();
        for (int c = 0; c < coroutines; ++c) {
            asio::co_spawn(
                io,
                [&, c]() -> asio::awaitable<void> {
                    auto lock = reg.obtain(name_of(c));
                    for (int i = 0; i < per_coroutine; ++i) {
                        auto g = co_await lock.acquire();
                        co_await g.release();
                    }
                    if (++finished == coroutines)
                        all_done.cancel();
                },
                asio::detached);
        }
        boost::system::error_code ec;
        co_await all_done.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        rate = coroutines * per_coroutine / std::chrono::duration<double>(clock_type::now() - t0).count();
        if (handed_off)
            *handed_off = reg.stats().handed_off;
    });
    return rate;
}

double distinct_names(std::uint16_t port, int cycles, double* cpu_us = nullptr)
{
    double cpu0 = cpu_seconds();
    double rate = cycle_rate(port, 64, cycles / 64, [](int c) { return "bench:distinct:" + std::to_string(c); });
    if (cpu_us)
        *cpu_us = (cpu_seconds() - cpu0) * 1e6 / (cycles / 64 * 64);
    return rate;
}

double local_handoff(std::uint16_t port, int acquisitions, std::uint64_t& handed_off)
{
    return cycle_rate(
        port, 16, acquisitions / 16, [](int) { return std::string("bench:hot"); }, &handed_off);
}

// The driver's own cost, no network: 16 coroutines taking turns on one name of a memory
// store (every turn a local hand-off, a renewal every handoff_budget turns).
double memory_local_handoff(int acquisitions)
{
    asio::io_context io;
    dlock::memory_store store(io.get_executor());
    dlock::registry reg(store);
    int per = acquisitions / 16;
    for (int c = 0; c < 16; ++c)
        asio::co_spawn(
            io,
            [&]() -> asio::awaitable<void> {
                auto lk = reg.obtain("bench:hot");
                for (int i = 0; i < per; ++i) {
                    auto g = co_await lk.acquire(asio::use_awaitable);
                    co_await g.release(asio::use_awaitable);
                }
            },
            asio::detached);
    auto t0 = std::chrono::steady_clock::now();
    io.run_for(std::chrono::seconds(120));
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return 16.0 * per / s;
}

// --peer waiters PORT N: one waiter on each of the names scale:w0..N-1 (held by the
// parent). Prints "queued" once every waiter is in its name's queue (two refused attempts
// each: the try, then the queued one), then, when all got their names, the counters.
int waiters_peer(std::uint16_t port, int n)
{
    std::ostringstream out;
    with_store(port, [&](asio::io_context& io, dlock::redis_store& store) -> asio::awaitable<void> {
        dlock::registry reg(store, {.lease = 30s});
        int got = 0;
        asio::steady_timer all_got(io, clock_type::time_point::max()), tick(io);
        std::vector<dlock::guard> held;
        held.resize(std::size_t(n));
        for (int i = 0; i < n; ++i)
            asio::co_spawn(
                io,
                [&, i]() -> asio::awaitable<void> {
                    held[std::size_t(i)] = co_await reg.obtain("scale:w" + std::to_string(i)).acquire();
                    if (++got == n)
                        all_got.cancel();
                },
                asio::detached);
        while (reg.stats().contended < 2u * unsigned(n)) {  // a progress report, not a lock wait
            tick.expires_after(10ms);
            co_await tick.async_wait(asio::use_awaitable);
        }
        std::cout << "queued" << std::endl;
        boost::system::error_code ec;
        if (got < n)
            co_await all_got.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        const auto& st = reg.stats();
        out << "got " << got << " store_handoffs " << st.store_handoffs << " by_timer " << st.woken_by_timer << "\n";
        for (auto& g : held)
            co_await g.release();
    });
    std::cout << out.str() << "done" << std::endl;
    return 0;
}

// --peer pingpong PORT ROUNDS: hold 3 ms (the other process queues meanwhile), release,
// pause 1 ms, again. Prints "acq NS" and "rel NS" on the shared monotonic clock.
// --peer sections PORT COROUTINES MS: 1 ms sections for MS milliseconds; prints counts.
int peer(char** argv)
{
    std::string mode = argv[2];
    auto port = static_cast<std::uint16_t>(std::atoi(argv[3]));
    if (mode == "rawpingpong")
        return raw_pingpong_peer(port, std::atoi(argv[4]));
    if (mode == "asiopingpong")
        return asio_pingpong_peer(port, std::atoi(argv[4]));
    if (mode == "waiters")
        return waiters_peer(port, std::atoi(argv[4]));
    std::ostringstream out;
    with_store(port, [&](asio::io_context& io, dlock::redis_store& store) -> asio::awaitable<void> {
        dlock::registry reg(store);
        auto lock = reg.obtain(mode == "pingpong" ? "bench:pingpong" : "bench:sections");
        asio::steady_timer t(io);
        if (mode == "pingpong") {
            int rounds = std::atoi(argv[4]);
            for (int i = 0; i < rounds; ++i) {
                auto g = co_await lock.acquire();
                out << "acq " << now_ns() << "\n";
                t.expires_after(3ms);
                co_await t.async_wait(asio::use_awaitable);
                out << "rel " << now_ns() << "\n";
                co_await g.release();
                t.expires_after(1ms);
                co_await t.async_wait(asio::use_awaitable);
            }
            const auto& s = reg.stats();
            std::cerr << "peer: store_handoffs=" << s.store_handoffs << " by_timer=" << s.woken_by_timer
                      << " contended=" << s.contended << "\n";
        } else {
            int coroutines = std::atoi(argv[4]);
            auto until = clock_type::now() + std::chrono::milliseconds(std::atoi(argv[5]));
            std::vector<int> counts(std::size_t(coroutines), 0);
            int finished = 0;
            asio::steady_timer all_done(io, clock_type::time_point::max());
            for (int c = 0; c < coroutines; ++c) {
                asio::co_spawn(
                    io,
                    [&, c]() -> asio::awaitable<void> {
                        asio::steady_timer section(io);
                        while (clock_type::now() < until) {
                            auto g = co_await lock.acquire();
                            section.expires_after(1ms);
                            co_await section.async_wait(asio::use_awaitable);
                            ++counts[std::size_t(c)];
                            co_await g.release();
                        }
                        if (++finished == coroutines)
                            all_done.cancel();
                    },
                    asio::detached);
            }
            boost::system::error_code ec;
            co_await all_done.async_wait(asio::redirect_error(asio::use_awaitable, ec));
            out << "counts";
            for (int n : counts)
                out << " " << n;
            out << "\n";
        }
    });
    std::cout << out.str() << "done" << std::endl;
    return 0;
}

// A case measured in blocks interleaved with the cases it is compared with: this VM flips
// between a fast and a slow state within a run, so two phases run seconds apart can each
// catch a different state. Each block runs every case once (the order rotating), and a
// ratio is the median of the blocks' ratios.
struct blocks {
    std::vector<double> all;   // every sample, pooled
    std::vector<double> p50s;  // per block
    std::vector<double> cpus;  // client CPU per cycle, per block
    void add(const std::vector<double>& lat, double cpu_us)
    {
        all.insert(all.end(), lat.begin(), lat.end());
        p50s.push_back(bench::percentile(lat, 0.5));
        cpus.push_back(cpu_us);
    }
};

// The median over blocks of num[i] / den[i] (an odd number of blocks: a true middle); a
// block without samples on either side (p50 0) is left out.
double median_ratio(const std::vector<double>& num, const std::vector<double>& den)
{
    std::vector<double> r;
    for (std::size_t i = 0; i < num.size() && i < den.size(); ++i)
        if (num[i] > 0 && den[i] > 0)
            r.push_back(num[i] / den[i]);
    return bench::percentile(r, 0.5);
}

std::vector<std::string> read_until_done(dlock::test::child& c)
{
    std::vector<std::string> lines;
    while (auto l = c.read_line(120s)) {
        if (*l == "done")
            break;
        lines.push_back(*l);
    }
    return lines;
}

std::vector<double> cross_process(std::uint16_t port, int rounds, const char* mode = "pingpong")
{
    std::vector<std::pair<long long, std::pair<int, bool>>> events;  // time, (process, is_acquire)
    dlock::test::child a({"/proc/self/exe", "--peer", mode, std::to_string(port), std::to_string(rounds)});
    dlock::test::child b({"/proc/self/exe", "--peer", mode, std::to_string(port), std::to_string(rounds)});
    int idx = 0;
    for (auto* c : {&a, &b}) {
        for (auto& l : read_until_done(*c)) {
            std::istringstream in(l);
            std::string kind;
            long long t = 0;
            in >> kind >> t;
            events.push_back({t, {idx, kind == "acq"}});
        }
        ++idx;
    }
    std::sort(events.begin(), events.end());
    std::vector<double> lat;
    for (std::size_t i = 0; i + 1 < events.size(); ++i) {
        auto [t, who] = events[i];
        auto [t2, next] = events[i + 1];
        if (!who.second && next.second && next.first != who.first)
            lat.push_back(double(t2 - t) / 1000.0);
    }
    return lat;
}

// The ceiling for 1 ms sections: back-to-back 1 ms timer waits, no lock at all (a timer
// wakes a little late, so even a free lock cannot reach 1,000/s).
double timer_sections_ceiling(int ms)
{
    asio::io_context io;
    asio::steady_timer t(io);
    int n = 0;
    auto until = clock_type::now() + std::chrono::milliseconds(ms);
    auto t0 = clock_type::now();
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            while (clock_type::now() < until) {
                t.expires_after(1ms);
                co_await t.async_wait(asio::use_awaitable);
                ++n;
            }
        },
        asio::detached);
    io.run();
    return n / std::chrono::duration<double>(clock_type::now() - t0).count();
}

bench::result two_process_sections(std::uint16_t port, int ms, int& least)
{
    dlock::test::child a({"/proc/self/exe", "--peer", "sections", std::to_string(port), "8", std::to_string(ms)});
    dlock::test::child b({"/proc/self/exe", "--peer", "sections", std::to_string(port), "8", std::to_string(ms)});
    long total = 0;
    int waiters = 0;
    least = 1 << 30;
    for (auto* c : {&a, &b}) {
        for (auto& l : read_until_done(*c)) {
            std::istringstream in(l);
            std::string word;
            in >> word;
            int n;
            while (in >> n) {
                total += n;
                least = std::min(least, n);
                ++waiters;
            }
        }
    }
    bench::result r;
    r.name = "two_process_sections_16";
    r.ops_per_s = total / (ms / 1000.0);
    r.met = least > 0 && waiters == 16;  // the rate's goal is set against the timer ceiling
    r.note = "least-served waiter: " + std::to_string(least) + " sections";
    return r;
}

long rss_bytes()
{
    std::ifstream f("/proc/self/statm");
    long size = 0, resident = 0;
    f >> size >> resident;
    return resident * ::sysconf(_SC_PAGESIZE);
}

// `calls=` of one command in INFO commandstats (e.g. "evalsha").
long long server_calls(raw_client& c, const std::string& command)
{
    dlock::redis::request info;
    info.push("INFO", "commandstats");
    c.send(info);
    auto text = c.next().str;
    auto at = text.find("cmdstat_" + command + ":calls=");
    return at == std::string::npos ? 0 : std::atoll(text.c_str() + at + command.size() + 15);
}

// connected_clients of INFO clients (this bench's raw connections included).
long server_clients(raw_client& c)
{
    dlock::redis::request info;
    info.push("INFO", "clients");
    c.send(info);
    auto text = c.next().str;
    auto at = text.find("connected_clients:");
    return at == std::string::npos ? -1 : std::atol(text.c_str() + at + 18);
}

// --scale: one process holds `locks` locks with the watchdog on (30 s leases, renewed every
// 10 s) for one renewal period and a half: memory per held lock (RSS delta / locks), the
// server's script calls per lock in that period, and the process's CPU while it only holds.
std::vector<bench::result> scale(std::uint16_t port, int locks)
{
    std::vector<bench::result> out;
    asio::io_context io(1);
    dlock::redis_store store(io.get_executor(), config_for(port));
    raw_client info(port);
    run_phase(
        io,
        [&]() -> asio::awaitable<void> {
            co_await store.connection().async_connect();
            {
                dlock::registry reg(store, {.lease = 30s});
                std::vector<dlock::guard> held;
                held.resize(std::size_t(locks));
                long rss0 = rss_bytes();
                constexpr int workers = 256;
                int finished = 0;
                asio::steady_timer all_done(io, clock_type::time_point::max());
                auto t0 = clock_type::now();
                for (int w = 0; w < workers; ++w)
                    asio::co_spawn(
                        io,
                        [&, w]() -> asio::awaitable<void> {
                            for (int i = w; i < locks; i += workers)
                                held[std::size_t(i)] = co_await reg.obtain("scale:" + std::to_string(i)).acquire();
                            if (++finished == workers)
                                all_done.cancel();
                        },
                        asio::detached);
                boost::system::error_code ec;
                co_await all_done.async_wait(asio::redirect_error(asio::use_awaitable, ec));
                double took = std::chrono::duration<double>(clock_type::now() - t0).count();
                long rss1 = rss_bytes();
                bench::result mem{"scale_memory_per_held_lock"};
                mem.ratio = double(rss1 - rss0) / locks / 1024.0;
                mem.goal = "<= 1 KiB per held lock";
                mem.met = *mem.ratio <= 1.0;
                mem.note = bench::fmt("%d locks taken in %.1f s (%.0f/s); RSS +%.1f MiB; ratio in KiB", locks, took,
                                      locks / took, double(rss1 - rss0) / 1048576.0);
                out.push_back(mem);

                auto calls0 = server_calls(info, "evalsha");
                double cpu0 = cpu_seconds();
                asio::steady_timer t(io);
                t.expires_after(15s);  // every lease renewed once (10 s), and then some
                co_await t.async_wait(asio::use_awaitable);
                auto calls = server_calls(info, "evalsha") - calls0;
                double cpu = cpu_seconds() - cpu0;
                bench::result ren{"scale_renewal_calls"};
                ren.ratio = double(calls) / locks;
                ren.goal = "far fewer script calls than locks per renewal period (ratio = calls / locks)";
                ren.met = *ren.ratio <= 0.1;
                ren.note = bench::fmt("%lld EVALSHA in 15 s for %d locks renewed every 10 s; renewals seen: %llu",
                                      calls, locks, (unsigned long long)reg.stats().renewals);
                out.push_back(ren);
                bench::result idle{"scale_idle_cpu"};
                idle.ratio = cpu / 15.0;
                idle.note =
                    bench::fmt("%.2f s CPU in 15 s while holding %d locks (ratio = share of one core)", cpu, locks);
                out.push_back(idle);
                for (auto& g : held)
                    g = dlock::guard();  // released in the background
                co_await reg.async_drain(asio::redirect_error(asio::use_awaitable, ec));
                if (reg.stats().lost > 0)
                    throw std::runtime_error("scale: " + std::to_string(reg.stats().lost) + " leases lost");

                // Names with a waiter each in another process: every release hands over.
                int names = locks / 10;
                std::vector<dlock::guard> mine;
                for (int i = 0; i < names; ++i)
                    mine.push_back(co_await reg.obtain("scale:w" + std::to_string(i)).acquire());
                dlock::test::child peer(
                    {"/proc/self/exe", "--peer", "waiters", std::to_string(port), std::to_string(names)});
                auto line = peer.read_line(120s);
                if (!line || *line != "queued")
                    throw std::runtime_error("scale: the waiters' process did not queue");
                auto clients = server_clients(info);
                auto t1 = clock_type::now();
                for (auto& g : mine)
                    co_await g.release();
                std::string counts;
                for (auto l = peer.read_line(120s); l && *l != "done"; l = peer.read_line(120s))
                    counts = *l;
                double took2 = std::chrono::duration<double>(clock_type::now() - t1).count();
                std::istringstream in(counts);
                std::string w;
                long got = -1, handoffs = -1, by_timer = -1;
                in >> w >> got >> w >> handoffs >> w >> by_timer;
                bench::result wt{"scale_waiters_handoffs"};
                wt.ops_per_s = names / took2;
                wt.ratio = double(handoffs) / names;
                wt.goal = "every waiter handed its name, connections bounded";
                wt.met = got == names && handoffs == names && clients <= 8;
                wt.note = bench::fmt("%d names, a waiter each in another process: %ld served, %ld by hand-off, %ld by "
                                     "timer; %ld client connections on the server while they waited",
                                     names, got, handoffs, by_timer, clients);
                out.push_back(wt);
            }
            store.close();
        },
        "scale");
    return out;
}

}  // namespace

// The uncontended cycle on a cluster_store over a three-master cluster started here.
std::vector<double> uncontended_cluster(int samples)
{
    dlock::test::redis_cluster cluster;
    asio::io_context io;
    dlock::cluster_store store(io.get_executor(), cluster.seeds());
    return uncontended_on(io, store, samples, "cluster");
}

int main(int argc, char** argv)
{
    // Timers fire when asked, not up to 50 us late (Linux's default slack): a "1 ms" section
    // then lasts 1 ms, for the lock and for its ceiling alike. Inherited by the peers.
    ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    if (argc >= 4 && std::string(argv[1]) == "--peer")
        return peer(argv);
    auto size = bench::run_size::full;
    bool as_json = false, only_scale = false, profile_only = false, awake = false, profile_floor = false,
         profile_distinct = false;
    int profile_cycles = 200'000;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--json")
            as_json = true;
        else if (bench::parse_run_size(a, size)) {
        } else if (a == "--scale")
            only_scale = true;
        else if (a == "--awake")
            awake = true;
        else if (a == "--profile-asio-floor")
            profile_floor = true;  // only asio_floor, 200,000 times: the profile to hold dlock's against
        else if (a == "--profile-uncontended")
            profile_only = true;  // only the uncontended cycle, 200,000 times: for perf / strace
        else if (a == "--profile-distinct")
            profile_distinct = true;  // only distinct_names_64, 200,000 cycles: is it bound by the client's CPU?
        else if (a == "--cycles" && i + 1 < argc) {
            profile_cycles = std::atoi(argv[++i]);  // for a profile under callgrind
            if (profile_cycles <= 0) {
                std::printf("lock_bench: --cycles wants a positive number\n");
                return 2;
            }
        } else {
            std::printf("usage: lock_bench [--json] [--quick | --smoke] [--awake] [--scale] [--profile-uncontended] "
                        "[--profile-asio-floor] [--profile-distinct] [--cycles N]\n");
            return a == "--help" ? 0 : 2;
        }
    }
    try {
        spinners keep_awake(awake);
        dlock::test::redis_server srv;
        auto port = srv.port();
        int samples = bench::by_size(size, 5000, 1000, 100);
        std::vector<double> rtt;
        bench::raw_pinger pinger(port);
        pinger.run(bench::by_size(size, 1000, 1000, 50), nullptr);
        pinger.run(samples, &rtt);
        double rtt_p50 = bench::percentile(rtt, 0.5);

        std::vector<bench::result> rs;
        rs.push_back(bench::summarize("raw_ping_rtt", rtt));
        if (profile_floor) {
            double cpu = 0;
            auto r = bench::summarize("asio_floor", asio_floor(port, 500, profile_cycles, cpu));
            std::printf("p50 %.1f us, %.1f us CPU per cycle\n", *r.p50_us, cpu);
            return 0;
        }
        if (profile_only) {
            double cpu = 0;
            auto r = bench::summarize("uncontended_acquire_release", uncontended(port, 500, profile_cycles, cpu));
            std::printf("p50 %.1f us, %.1f us CPU per cycle\n", *r.p50_us, cpu);
            return 0;
        }
        if (profile_distinct) {
            double cpu = 0;
            double rate = distinct_names(port, profile_cycles, &cpu);
            std::printf("%.0f cycles/s, %.1f us client CPU per cycle (%.0f%% of a core)\n", rate, cpu,
                        rate * cpu / 1e4);
            return 0;
        }
        if (only_scale) {
            for (auto& r : scale(port, bench::by_size(size, 100'000, 10'000, 1'000)))
                rs.push_back(r);
            if (as_json) {
                for (auto& r : rs)
                    bench::print_json(r, rtt_p50);
            } else {
                bench::print_table(rs);
            }
            return 0;
        }
        // The same PING after 3 ms idle, as a hand-off comes after a hold: the wake-ups of
        // an idle client and server cost more than a hot loop's round trip.
        std::vector<double> idle_rtt;
        for (int i = 0; i < bench::by_size(size, 300, 100, 10); ++i) {
            ::usleep(3000);
            pinger.run(1, &idle_rtt);
        }
        auto idle = bench::summarize("raw_idle_ping_rtt", idle_rtt);
        idle.ratio = *idle.p50_us / rtt_p50;
        idle.note = "PING after 3 ms idle";
        rs.push_back(idle);
        // The pipelined ceiling and 64 names on one connection, interleaved in blocks.
        const int dblocks = bench::by_size(size, 5, 3, 1), dcycles = bench::by_size(size, 40'000, 20'000, 500);
        std::vector<double> ceilings, distincts;
        for (int b = 0; b < dblocks; ++b)
            for (int k = 0; k < 2; ++k) {
                if ((b + k) % 2 == 0)
                    ceilings.push_back(raw_lua_ceiling(port, dcycles));
                else
                    distincts.push_back(distinct_names(port, dcycles));
            }
        double ceiling = bench::percentile(ceilings, 0.5);
        rs.push_back(
            {"raw_lua_pipelined_ceiling", {}, {}, ceiling, {}, {}, {}, "acquire+release cycles/s (block median)"});

        // minimal_floor, asio_floor, the raw scripts and dlock's cycle, interleaved in blocks.
        enum {
            k_minimal,
            k_asio,
            k_raw,
            k_dlock,
            k_cases
        };
        const int nblocks = bench::by_size(size, 11, 5, 1), per_block = bench::by_size(size, 500, 200, 20),
                  warm = bench::by_size(size, 200, 200, 20);
        std::array<blocks, k_cases> uc;
        for (int b = 0; b < nblocks; ++b)
            for (int k = 0; k < k_cases; ++k) {
                int which = (b + k) % k_cases;
                double cpu_us = 0;
                std::vector<double> lat;
                if (which == k_minimal)
                    lat = minimal_floor(port, warm, per_block, cpu_us);
                else if (which == k_asio)
                    lat = asio_floor(port, warm, per_block, cpu_us);
                else if (which == k_raw)
                    lat = raw_uncontended(port, warm, per_block, cpu_us);
                else
                    lat = uncontended(port, warm, per_block, cpu_us);
                uc[std::size_t(which)].add(lat, cpu_us);
            }
        const auto& mb = uc[k_minimal];
        auto blocks_note = bench::fmt("ratios: medians of %d interleaved blocks", nblocks);
        auto minimal = bench::summarize("minimal_floor", mb.all);
        minimal.ratio = *minimal.p50_us / rtt_p50;
        minimal.cpu_us = bench::percentile(mb.cpus, 0.5);
        minimal.note = "SET NX PX + compare-and-delete by hand, blocking socket (ratio: x RTT)";
        rs.push_back(minimal);
        auto asio_min = bench::summarize("asio_floor", uc[k_asio].all);
        asio_min.ratio = median_ratio(uc[k_asio].p50s, mb.p50s);
        asio_min.cpu_us = bench::percentile(uc[k_asio].cpus, 0.5);
        asio_min.note = bench::fmt("the same over an Asio socket, no library (ratio: x minimal_floor); CPU %.2f x its",
                                   median_ratio(uc[k_asio].cpus, mb.cpus));
        rs.push_back(asio_min);
        auto raw_solo = bench::summarize("raw_uncontended_floor", uc[k_raw].all);
        raw_solo.ratio = median_ratio(uc[k_raw].p50s, mb.p50s);
        raw_solo.note = "dlock's two scripts over a blocking socket, no library (ratio: x minimal_floor)";
        rs.push_back(raw_solo);

        const auto& db = uc[k_dlock];
        auto solo = bench::summarize("uncontended_acquire_release", db.all);
        solo.ratio = median_ratio(db.p50s, mb.p50s);
        solo.cpu_us = bench::percentile(db.cpus, 0.5);
        solo.goal = "p50 <= 1.25 x minimal_floor";
        solo.met = *solo.ratio <= 1.25;
        solo.note = bench::fmt("%.2f x the raw floor of its own scripts, %.2f x asio_floor; pooled p50s %.2f; %s",
                               median_ratio(db.p50s, uc[k_raw].p50s), median_ratio(db.p50s, uc[k_asio].p50s),
                               *solo.p50_us / *minimal.p50_us, blocks_note.c_str());
        rs.push_back(solo);
        bench::result cpu{"uncontended_client_cpu"};
        cpu.cpu_us = *solo.cpu_us;
        cpu.ratio = median_ratio(db.cpus, mb.cpus);
        cpu.goal = "<= 1.5 x minimal_floor's CPU per cycle";
        cpu.met = *cpu.ratio <= 1.5;
        cpu.note = bench::fmt("user+sys per cycle (block medians): %.1f us vs %.1f us (asio_floor %.1f us)",
                              *solo.cpu_us, *minimal.cpu_us, *asio_min.cpu_us);
        rs.push_back(cpu);

        {
            auto cl = bench::summarize("cluster3_uncontended", uncontended_cluster(samples));
            cl.ratio = *cl.p50_us / *solo.p50_us;
            cl.note = "3-master Redis Cluster; ratio to uncontended_acquire_release";
            rs.push_back(cl);
        }

        {
            dlock::test::redis_server node2, node3;
            auto rl = bench::summarize(
                "redlock3_uncontended",
                uncontended_redlock({config_for(port), config_for(node2.port()), config_for(node3.port())}, samples));
            rl.ratio = *rl.p50_us / *solo.p50_us;
            rl.goal = "the single node no slower: ratio >= 1";
            rl.met = *rl.ratio >= 1.0;
            rl.note = "ratio: redlock p50 / uncontended_acquire_release p50";
            rs.push_back(rl);
        }

        bench::result distinct{"distinct_names_64", {}, {}, bench::percentile(distincts, 0.5)};
        distinct.ratio = median_ratio(distincts, ceilings);
        distinct.goal = ">= 0.8 x ceiling";
        distinct.met = *distinct.ratio >= 0.8;
        distinct.note = bench::fmt("cycles/s (block median); ratio: median of %d interleaved blocks", dblocks);
        rs.push_back(distinct);

        std::uint64_t handed = 0;
        bench::result hot{
            "local_handoff_16", {}, {}, local_handoff(port, bench::by_size(size, 400'000, 50'000, 2'000), handed)};
        hot.goal = ">= 100000/s";
        hot.met = *hot.ops_per_s >= 100'000;
        hot.note = std::to_string(handed) + " local hand-offs";
        rs.push_back(hot);
        bench::result mem{
            "memory_local_handoff_16", {}, {}, memory_local_handoff(bench::by_size(size, 640'000, 100'000, 2'000))};
        mem.note = "the same on the memory store: the lock driver's own cost, no network";
        rs.push_back(mem);

        // The hand-off and its floors, interleaved in blocks (each run: two fresh peers).
        const int hblocks = bench::by_size(size, 5, 3, 1), rounds = bench::by_size(size, 100, 60, 5);
        static constexpr const char* handoff_modes[] = {"rawpingpong", "asiopingpong", "pingpong"};
        std::array<blocks, 3> hb;  // raw, asio, dlock
        for (int b = 0; b < hblocks; ++b)
            for (int k = 0; k < 3; ++k) {
                int which = (b + k) % 3;
                hb[std::size_t(which)].add(cross_process(port, rounds, handoff_modes[which]), 0);
            }
        auto raw_cross = bench::summarize("raw_cross_process_floor", hb[0].all);
        raw_cross.ratio = *raw_cross.p50_us / rtt_p50;
        raw_cross.note = "the lock's protocol (queued acquire, hand-off message) over blocking sockets, no library";
        rs.push_back(raw_cross);
        auto asio_cross = bench::summarize("asio_handoff_floor", hb[1].all);
        asio_cross.ratio = median_ratio(hb[1].p50s, hb[0].p50s);
        asio_cross.note = "the same protocol over Asio sockets from a coroutine, no library (ratio: x raw)";
        rs.push_back(asio_cross);
        auto cross = bench::summarize("cross_process_handoff", hb[2].all);
        cross.ratio = median_ratio(hb[2].p50s, hb[0].p50s);
        cross.note = bench::fmt("%.2f x asio_handoff_floor, %.2f x the idle RTT; pooled p50s %.2f; ratio: median of "
                                "%d interleaved blocks",
                                median_ratio(hb[2].p50s, hb[1].p50s), *cross.p50_us / *idle.p50_us,
                                *cross.p50_us / *raw_cross.p50_us, hblocks);
        cross.goal = "p50 <= 1.15 x raw_cross_process_floor, p99 <= 1000 us";
        cross.met = *cross.ratio <= 1.15 && *cross.p99_us <= 1000;
        rs.push_back(cross);

        // 1 ms sections and their timer-only ceiling, interleaved in blocks; every block
        // must serve every waiter.
        const int sblocks = bench::by_size(size, 3, 3, 1), sms = bench::by_size(size, 1500, 600, 100);
        std::vector<double> timer_rates, section_rates;
        bench::result sections;
        bool all_served = true;
        int least = 1 << 30;
        for (int b = 0; b < sblocks; ++b)
            for (int k = 0; k < 2; ++k) {
                if ((b + k) % 2 == 0) {
                    timer_rates.push_back(timer_sections_ceiling(sms / 2));
                    continue;
                }
                int block_least = 0;
                sections = two_process_sections(port, sms, block_least);
                section_rates.push_back(*sections.ops_per_s);
                all_served = all_served && sections.met.value_or(false);
                least = std::min(least, block_least);
            }
        bench::result tc;
        tc.name = "timer_1ms_sections_ceiling";
        tc.ops_per_s = bench::percentile(timer_rates, 0.5);
        tc.note = "1 ms sections with no lock at all (block median)";
        rs.push_back(tc);
        sections.ops_per_s = bench::percentile(section_rates, 0.5);
        sections.ratio = median_ratio(section_rates, timer_rates);
        sections.goal = ">= 0.97 x timer ceiling, every waiter served";
        sections.met = *sections.ratio >= 0.97 && all_served;
        sections.note =
            bench::fmt("least-served waiter: %d sections; ratio: median of %d interleaved blocks", least, sblocks);
        rs.push_back(sections);

        if (as_json) {
            for (auto& r : rs)
                bench::print_json(r, rtt_p50);
        } else {
            std::printf("dlock lock_bench: redis-server on 127.0.0.1:%u, RTT p50 %.1f us%s\n\n", port, rtt_p50,
                        awake ? ", CPUs kept awake (--awake)" : "");
            bench::print_table(rs);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "lock_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
