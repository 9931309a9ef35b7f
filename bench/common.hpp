// SPDX-License-Identifier: BSL-1.0
// Shared pieces of the benchmarks: percentiles, the raw PING baseline, JSON lines.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace bench {

using clock_type = std::chrono::steady_clock;

/// How much a bench runs: its full figures, --quick (fewer samples), or --smoke (tiny counts,
/// a few seconds: ctest runs every bench so, and a crash or a hang fails the build; the
/// figures of a smoke run mean nothing and are printed, never checked).
enum class run_size {
    full,
    quick,
    smoke
};
/// Reads --quick or --smoke into `s`; false for any other argument.
inline bool parse_run_size(const std::string& a, run_size& s)
{
    if (a == "--quick")
        s = run_size::quick;
    else if (a == "--smoke")
        s = run_size::smoke;
    else
        return false;
    return true;
}
/// The count for this run size.
template <class T>
T by_size(run_size s, T full, T quick, T smoke)
{
    return s == run_size::smoke ? smoke : s == run_size::quick ? quick : full;
}

inline double us_since(clock_type::time_point t0)
{
    return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
}

/// The shared monotonic clock in ns: peer processes log "acq NS" / "rel NS" lines with it.
inline long long now_ns()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch()).count();
}

/// Two processes' "acq NS" / "rel NS" logs: each release by one side followed by the other
/// side's acquire is one hand-off; returns their latencies in µs.
inline std::vector<double> handoff_latencies(const std::string& a, const std::string& b)
{
    std::vector<std::tuple<long long, char, int>> ev;  // time, kind, side
    for (auto [text, side] : {std::pair{&a, 0}, std::pair{&b, 1}}) {
        std::istringstream in(*text);
        std::string kind;
        long long t;
        while (in >> kind >> t)
            ev.emplace_back(t, kind[0], side);
    }
    std::sort(ev.begin(), ev.end());
    std::vector<double> lat;
    for (std::size_t i = 1; i < ev.size(); ++i) {
        auto [t0, k0, s0] = ev[i - 1];
        auto [t1, k1, s1] = ev[i];
        if (k0 == 'r' && k1 == 'a' && s0 != s1)
            lat.push_back(double(t1 - t0) / 1000.0);
    }
    return lat;
}

/// Nearest-rank percentile.
inline double percentile(std::vector<double> v, double q)
{
    if (v.empty())
        return 0;
    auto rank = static_cast<std::size_t>(std::ceil(q * double(v.size())));
    rank = std::clamp<std::size_t>(rank, 1, v.size());
    std::nth_element(v.begin(), v.begin() + long(rank - 1), v.end());
    return v[rank - 1];
}

struct result {
    std::string name{};
    std::optional<double> p50_us{}, p99_us{}, ops_per_s{};
    std::optional<double> ratio{};  ///< against the case's baseline
    std::string goal{};             ///< e.g. "<= 2.2 x RTT"
    std::optional<bool> met{};
    std::string note{};
    std::optional<double> cpu_us{};  ///< client CPU (user+sys) per operation
};

/// printf into a std::string (notes).
template <class... Args>
std::string fmt(const char* f, Args... args)
{
    char buf[256];
    std::snprintf(buf, sizeof buf, f, args...);
    return buf;
}

inline result summarize(std::string name, const std::vector<double>& lat_us, std::optional<double> ops = {})
{
    result r;
    r.name = std::move(name);
    r.p50_us = percentile(lat_us, 0.50);
    r.p99_us = percentile(lat_us, 0.99);
    r.ops_per_s = ops;
    return r;
}

/// The server round trip with no library in the way: one PING, block until +PONG.
class raw_pinger {
public:
    explicit raw_pinger(std::uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0))
    {
        if (fd_ < 0)
            throw std::runtime_error("socket() failed");
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(port);
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
            ::close(fd_);
            throw std::runtime_error("raw connect failed");
        }
        int one = 1;
        ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        timeval tv{5, 0};
        ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
    ~raw_pinger() { ::close(fd_); }
    raw_pinger(const raw_pinger&) = delete;
    raw_pinger& operator=(const raw_pinger&) = delete;
    int fd() const noexcept { return fd_; }

    void run(int n, std::vector<double>* lat)
    {
        static constexpr char ping[] = "*1\r\n$4\r\nPING\r\n";
        static constexpr char pong[] = "+PONG\r\n";
        for (int i = 0; i < n; ++i) {
            auto t0 = clock_type::now();
            if (::write(fd_, ping, sizeof ping - 1) != ssize_t(sizeof ping - 1))
                throw std::runtime_error("raw write failed");
            char buf[16];
            std::size_t got = 0;
            while (got < sizeof pong - 1) {
                ssize_t r = ::read(fd_, buf + got, sizeof buf - got);
                if (r <= 0)
                    throw std::runtime_error("raw read failed or timed out");
                got += std::size_t(r);
            }
            if (got != sizeof pong - 1 || std::memcmp(buf, pong, got) != 0)
                throw std::runtime_error("raw PING: unexpected reply");
            if (lat)
                lat->push_back(us_since(t0));
        }
    }

private:
    int fd_;
};

/// One JSON object per line: {"case", "p50_us", "p99_us", "ops_per_s", "rtt_p50_us", ...}.
inline void print_json(const result& r, double rtt_p50)
{
    boost::json::object o;
    o["case"] = r.name;
    if (r.p50_us)
        o["p50_us"] = *r.p50_us;
    if (r.p99_us)
        o["p99_us"] = *r.p99_us;
    if (r.ops_per_s)
        o["ops_per_s"] = *r.ops_per_s;
    o["rtt_p50_us"] = rtt_p50;
    if (r.ratio)
        o["ratio"] = *r.ratio;
    if (!r.goal.empty())
        o["goal"] = r.goal;
    if (r.met)
        o["goal_met"] = *r.met;
    if (r.cpu_us)
        o["cpu_us_per_op"] = *r.cpu_us;
    if (!r.note.empty())
        o["note"] = r.note;
    std::printf("%s\n", boost::json::serialize(o).c_str());
}

inline std::string cell(const std::optional<double>& v, const char* fmt)
{
    if (!v)
        return "-";
    char buf[64];
    std::snprintf(buf, sizeof buf, fmt, *v);
    return buf;
}

inline void print_table(const std::vector<result>& rs)
{
    std::printf("%-34s %10s %10s %12s %8s  %s\n", "case", "p50 us", "p99 us", "ops/s", "ratio", "goal");
    for (const auto& r : rs) {
        std::string goal = r.goal.empty() ? "" : r.goal + (r.met ? (*r.met ? "  met" : "  MISSED") : "");
        std::printf("%-34s %10s %10s %12s %8s  %s%s%s\n", r.name.c_str(), cell(r.p50_us, "%.1f").c_str(),
                    cell(r.p99_us, "%.1f").c_str(), cell(r.ops_per_s, "%.0f").c_str(), cell(r.ratio, "%.2f").c_str(),
                    goal.c_str(), r.note.empty() ? "" : "  ", r.note.c_str());
    }
}

}  // namespace bench
