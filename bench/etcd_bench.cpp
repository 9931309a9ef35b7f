// SPDX-License-Identifier: BSL-1.0
/*
 * etcd_bench: what the lock costs on etcd, as ratios to figures measured in the same run.
 *
 * A throwaway 3-member etcd cluster on free loopback ports (--unsafe-no-fsync); the cases:
 *   raw_cycle_floor             the store's own acquire Txn and release Txn, sent raw over one
 *                               keep-alive HTTP connection with a blocking socket, no library
 *                               (in blocks of 100 interleaved with the next case's)
 *   uncontended_acquire_release one coroutine, one name, through registry + etcd_store;
 *                               ratio to raw_cycle_floor
 *   cross_process_handoff       two processes take turns (hold 3 ms, release, 1 ms pause): the
 *                               time from one's release to the other's acquire
 * Options: --json (one JSON object per line), --quick (fewer samples), --smoke (tiny counts,
 * seconds: what ctest runs).
 * The peer process is this program started again with --peer.
 */
#include <dlock/dlock.hpp>
#include <dlock/etcd.hpp>

#include "common.hpp"
#include "common/child.hpp"
#include "common/etcd_cluster.hpp"
#include "etcd/codec.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <sys/prctl.h>

#include <iostream>
#include <map>
#include <sstream>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using bench::clock_type;
using bench::now_ns;
namespace codec = dlock::etcd::detail;

namespace {

// One keep-alive HTTP/1.1 connection with a blocking socket: POST, read the whole reply.
class raw_http {
public:
    explicit raw_http(std::uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0))
    {
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(port);
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
            throw std::runtime_error("raw connect failed");
        int one = 1;
        ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        host_ = "127.0.0.1:" + std::to_string(port);
    }
    ~raw_http() { ::close(fd_); }
    raw_http(const raw_http&) = delete;
    raw_http& operator=(const raw_http&) = delete;

    std::string post(std::string_view path, const std::string& body)
    {
        std::string req = "POST " + std::string(path) + " HTTP/1.1\r\nHost: " + host_ +
                          "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                          "\r\n\r\n" + body;
        if (::send(fd_, req.data(), req.size(), 0) != static_cast<ssize_t>(req.size()))
            throw std::runtime_error("raw send failed");
        for (;;) {
            auto head_end = buf_.find("\r\n\r\n");
            if (head_end != std::string::npos) {
                auto cl = buf_.find("Content-Length: ");
                if (cl == std::string::npos || cl > head_end)
                    throw std::runtime_error("raw reply without Content-Length");
                auto len = std::stoul(buf_.substr(cl + 16));
                if (buf_.size() >= head_end + 4 + len) {
                    std::string reply = buf_.substr(head_end + 4, len);
                    buf_.erase(0, head_end + 4 + len);
                    return reply;
                }
            }
            char chunk[4096];
            auto n = ::recv(fd_, chunk, sizeof chunk, 0);
            if (n <= 0)
                throw std::runtime_error("raw recv failed");
            buf_.append(chunk, static_cast<std::size_t>(n));
        }
    }

private:
    int fd_;
    std::string host_, buf_;
};

// The raw floor: a lease, then acquire and release Txns as the store sends them.
class raw_locker {
public:
    explicit raw_locker(std::uint16_t port) : h_(port)
    {
        codec::lease_reply lease;
        codec::reply_error err;
        if (!codec::parse_lease(h_.post(codec::grant_path, codec::grant_request(30)), lease, err))
            throw std::runtime_error("raw grant: " + err.text);
        lease_ = lease.id;
        key_ = codec::lock_key(range_, lease_) + "-t";
    }
    ~raw_locker() { h_.post(codec::revoke_path, codec::lease_id_request(lease_)); }
    double cycle()
    {
        auto t0 = clock_type::now();
        codec::acquire_reply a;
        codec::reply_error err;
        if (!codec::parse_acquire(h_.post(codec::txn_path, codec::try_acquire_txn(key_, range_, "t", lease_)), false,
                                  key_, "t", lease_, a, err) ||
            !a.put)
            throw std::runtime_error("raw acquire failed");
        bool deleted = false, held = false;
        if (!codec::parse_release(h_.post(codec::txn_path, codec::release_txn({key_, 0, "t"}, range_)), key_, deleted,
                                  held, err) ||
            !held)
            throw std::runtime_error("raw release failed");
        return bench::us_since(t0);
    }

private:
    raw_http h_;
    std::int64_t lease_ = 0;
    std::string range_ = "bench:raw/", key_;
};

dlock::etcd::config config_of(const std::string& url)
{
    dlock::etcd::config c;
    dlock::etcd::config_error err;
    if (!dlock::etcd::parse_url(url, c, err))
        throw std::runtime_error(err.message);
    return c;
}

template <class Body>
void with_store(const std::string& url, Body body)
{
    asio::io_context io;
    dlock::etcd_store store(io.get_executor(), config_of(url));
    std::exception_ptr failure;
    bool done = false;
    asio::co_spawn(io, body(io, store), [&](std::exception_ptr e) {
        failure = e;
        done = true;
        store.close();
    });
    io.run_for(300s);
    if (failure)
        std::rethrow_exception(failure);
    if (!done)
        throw std::runtime_error("a bench phase did not finish in 300 s");
}

// Blocks of the raw floor and of the library alternate, so both see the same machine.
void uncontended(const std::string& url, std::uint16_t port, int samples, std::vector<double>& raw,
                 std::vector<double>& lib)
{
    raw_locker rl(port);
    with_store(url, [&](asio::io_context&, dlock::etcd_store& store) -> asio::awaitable<void> {
        dlock::registry reg(store, {.lease = 10s});
        auto lock = reg.obtain("bench:solo");
        for (int block = 0; block < samples / 100 + 2; ++block) {
            for (int i = 0; i < 100; ++i) {
                auto t0 = clock_type::now();
                auto g = co_await lock.acquire();
                co_await g.release();
                if (block >= 2)
                    lib.push_back(bench::us_since(t0));
            }
            for (int i = 0; i < 100; ++i) {
                auto us = rl.cycle();
                if (block >= 2)
                    raw.push_back(us);
            }
        }
    });
}

// Both sides run this: take the lock, hold it 3 ms, release, pause 1 ms; log the times.
std::string pingpong(const std::string& url, int rounds)
{
    std::ostringstream out;
    with_store(url, [&](asio::io_context& io, dlock::etcd_store& store) -> asio::awaitable<void> {
        dlock::registry reg(store, {.lease = 10s});
        auto lock = reg.obtain("bench:pingpong");
        asio::steady_timer t(io);
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
    });
    return out.str();
}

}  // namespace

int main(int argc, char** argv)
{
    ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    if (argc >= 4 && std::string(argv[1]) == "--peer") {
        std::cout << pingpong(argv[2], std::atoi(argv[3])) << "end 0" << std::endl;
        return 0;
    }
    bool as_json = false;
    auto size = bench::run_size::full;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--json")
            as_json = true;
        else if (!bench::parse_run_size(a, size)) {
            std::printf("usage: etcd_bench [--json] [--quick | --smoke]\n");
            return a == "--help" ? 0 : 2;
        }
    }
    try {
        dlock::test::etcd_cluster cluster;
        // Both measure against the first member, where the store's first connection goes.
        auto port = cluster.client_port(0);
        int samples = bench::by_size(size, 2000, 300, 100);
        std::vector<bench::result> rs;
        std::vector<double> raw_us, lib_us;
        uncontended(cluster.url(), port, samples, raw_us, lib_us);
        auto raw = bench::summarize("raw_cycle_floor", raw_us);
        raw.note = "the store's acquire and release Txns over one keep-alive connection, no library";
        rs.push_back(raw);
        auto solo = bench::summarize("uncontended_acquire_release", lib_us);
        solo.ratio = *solo.p50_us / *raw.p50_us;
        solo.note = "registry + etcd_store; ratio to raw_cycle_floor";
        rs.push_back(solo);

        int rounds = bench::by_size(size, 400, 100, 10);
        dlock::test::child peer({"/proc/self/exe", "--peer", cluster.url(), std::to_string(rounds)});
        auto mine = pingpong(cluster.url(), rounds);
        std::string theirs, line;
        while (auto l = peer.read_line(120s)) {
            if (l->rfind("end", 0) == 0)
                break;
            theirs += *l + "\n";
        }
        peer.wait();
        auto cross = bench::summarize("cross_process_handoff", bench::handoff_latencies(mine, theirs));
        cross.ratio = *cross.p50_us / *raw.p50_us;
        cross.note = "release in one process -> acquire in the other; ratio to raw_cycle_floor";
        rs.push_back(cross);

        if (as_json) {
            for (auto& r : rs)
                bench::print_json(r, *raw.p50_us);
        } else {
            std::printf("dlock etcd_bench: 3-member etcd cluster on 127.0.0.1, raw cycle p50 %.1f us\n\n", *raw.p50_us);
            bench::print_table(rs);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "etcd_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
