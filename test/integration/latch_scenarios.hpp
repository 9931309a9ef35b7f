// SPDX-License-Identifier: BSL-1.0
// The count-down latch's scenarios with real processes, written once for every store that has
// the primitive: latch_worker processes (integration/latch_worker.cpp) on `where` (a Redis
// port, or a zk://, etcd:// or postgresql:// URL) count down and wait. Each store's test file
// calls them and adds what only it can check (its keys and their expiry on Redis).
#pragma once

#include <dlock/dlock.hpp>

#include "common/child.hpp"
#include "integration/lock_test_util.hpp"  // eventually

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace dlock::test::latch {

using namespace std::chrono_literals;

/// The latch `name` (as the store sees it: the registry's "dlock:" first), read by a store of
/// its own.
using state_fn = std::function<dlock::latch_state(const std::string& name)>;
/// True once the waiter of the registry's `name` watches it, where the store can tell from
/// outside (Redis: its subscription); empty where it cannot.
using watching_fn = std::function<bool(const std::string& name)>;

inline std::string worker()
{
    return DLOCK_LATCH_WORKER_PATH;
}

/// The latch `name` read by a `Store` of its own on `cfg` (a state_fn's body).
template <class Store, class Config>
dlock::latch_state state_from(const Config& cfg, const std::string& name)
{
    boost::asio::io_context io;
    Store st(io.get_executor(), cfg);
    dlock::latch_state out;
    bool done = false;
    st.latches()->async_latch_state(name, [&](boost::system::error_code ec, dlock::latch_state s) {
        BOOST_TEST(!ec, name << ": " << ec.message());
        out = s;
        done = true;
        st.close();
    });
    io.run_for(20s);
    BOOST_TEST(done, name << ": no answer within 20 s");
    return out;
}

/// A waiter process and four count-downs of three members (one sent twice, from two
/// processes): not done; the fourth member's count-down wakes it with nothing left.
inline void a_waiter_wakes_exactly_at_the_last_count_down(const std::string& where, const state_fn& state_of,
                                                          const watching_fn& watching = {})
{
    constexpr int n = 4;
    child waiter({worker(), "wait", where, "job", std::to_string(n)});
    if (watching)
        BOOST_REQUIRE(watching("job"));
    for (const char* m : {"a", "b", "b", "c"}) {
        child c({worker(), "count_down", where, "job", std::to_string(n), m});
        BOOST_TEST_MESSAGE("count_down " << m << ": " << c.read_line(20s).value_or("<none>"));
        BOOST_TEST(c.wait() == 0);
    }
    auto s = state_of("dlock:job");
    BOOST_TEST(s.count == 4u);
    BOOST_TEST(s.remaining == 1u);
    if (watching)
        BOOST_TEST(watching("job"));  // still waiting, checked from outside
    BOOST_TEST(!waiter.read_line(200ms).has_value());
    child last({worker(), "count_down", where, "job", std::to_string(n), "d"});
    BOOST_TEST(last.read_line(20s).value_or("") == "remaining 0");
    BOOST_TEST(last.wait() == 0);
    BOOST_TEST(waiter.read_line(20s).value_or("") == "woken remaining=0");
    BOOST_TEST(waiter.wait() == 0);
}

/// Six processes count down a latch of six at once, each with a member of its own: each
/// count-down is one atomic step at the store, so they report 5 .. 0, each once, and the
/// waiter wakes.
inline void concurrent_processes_each_count_once(const std::string& where, const state_fn& state_of,
                                                 const watching_fn& watching = {})
{
    constexpr int n = 6;
    child waiter({worker(), "wait", where, "many", std::to_string(n)});
    if (watching)
        BOOST_REQUIRE(watching("many"));
    std::vector<std::unique_ptr<child>> counters;
    for (int i = 0; i < n; ++i)
        counters.push_back(std::make_unique<child>(
            std::vector<std::string>{worker(), "count_down", where, "many", std::to_string(n), "-"}));
    std::multiset<std::string> seen, expected;
    for (int i = 0; i < n; ++i)
        expected.insert("remaining " + std::to_string(i));
    for (auto& c : counters) {
        seen.insert(c->read_line(20s).value_or("<none>"));
        BOOST_TEST(c->wait() == 0);
    }
    BOOST_TEST((seen == expected));
    BOOST_TEST(waiter.read_line(20s).value_or("") == "woken remaining=0");
    BOOST_TEST(state_of("dlock:many").remaining == 0u);
}

/// A latch of 3 counted once; another process asking with 4 is refused, and nothing changed.
inline void a_count_mismatch_across_processes_is_refused(const std::string& where, const state_fn& state_of)
{
    child a({worker(), "count_down", where, "mm", "3", "a"});
    BOOST_TEST(a.read_line(20s).value_or("") == "remaining 2");
    BOOST_TEST(a.wait() == 0);
    child b({worker(), "count_down", where, "mm", "4", "b"});
    auto line = b.read_line(20s).value_or("");
    BOOST_TEST(line.find("different count") != std::string::npos, line);
    BOOST_TEST(b.wait() != 0);
    BOOST_TEST(state_of("dlock:mm").remaining == 2u);
}

/// A wait cancelled (or timed out) is gone: the latch completes later without it, and a new
/// wait then returns at once. Ends by closing nothing: the caller closes its store.
inline boost::asio::awaitable<void> a_cancelled_or_timed_out_wait_ends_cleanly(dlock::registry& reg)
{
    namespace asio = boost::asio;
    dlock::latch l(reg, "c", 1);
    asio::cancellation_signal sig;
    std::optional<boost::system::error_code> result;
    l.wait(asio::bind_cancellation_slot(sig.slot(), [&](boost::system::error_code ec) { result = ec; }));
    sig.emit(asio::cancellation_type::terminal);
    BOOST_TEST(co_await eventually([&] { return result.has_value(); }));
    BOOST_TEST((result && *result == asio::error::operation_aborted));
    auto [ec] = co_await l.wait_for(50ms, asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(ec == dlock::error::timeout);
    BOOST_TEST(co_await l.count_down(asio::use_awaitable) == 0u);
    co_await l.wait(asio::use_awaitable);
}

/// A latch's name refuses a mutex and a mutex's name a latch, each naming what the name is
/// (`st` is the store under `reg` and `ops`); bad input is refused before anything is sent.
/// Leaves the latch "dlock:latched" for the caller's own checks.
inline boost::asio::awaitable<void> kinds_do_not_mix_and_bad_input_is_refused(dlock::registry& reg, dlock::store& st,
                                                                              dlock::latch_capability& ops)
{
    namespace asio = boost::asio;
    constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
    const std::string latched = "dlock:latched", locked = "dlock:locked", bad = "bad", a = "a", b = "b", empty;
    BOOST_TEST(co_await ops.async_count_down(latched, a, 2, 60s, asio::use_awaitable) == 1u);
    auto [e0, g0] = co_await reg.obtain("latched").try_acquire(use_tuple);
    BOOST_TEST(e0 == dlock::error::kind_mismatch, e0.message());
    BOOST_TEST(st.last_error_text().find("a latch") != std::string::npos, st.last_error_text());
    auto held = co_await reg.obtain("locked").acquire(asio::use_awaitable);
    auto [e1, r1] = co_await ops.async_count_down(locked, a, 2, 60s, use_tuple);
    BOOST_TEST(e1 == dlock::error::kind_mismatch, e1.message());
    BOOST_TEST(st.last_error_text().find("a mutex") != std::string::npos, st.last_error_text());
    co_await held.release(asio::use_awaitable);
    auto [e2, r2] = co_await ops.async_count_down(bad, empty, 3, 60s, use_tuple);
    BOOST_TEST(e2 == dlock::error::invalid_option);
    auto [e3, r3] = co_await ops.async_count_down(bad, b, 0, 60s, use_tuple);
    BOOST_TEST(e3 == dlock::error::invalid_option);
    auto [e4, r4] = co_await ops.async_count_down(bad, b, 3, 0s, use_tuple);
    BOOST_TEST(e4 == dlock::error::invalid_lease);
    auto [e5, r5] = co_await ops.async_count_down(bad, b, dlock::max_latch_count + 1, 60s, use_tuple);
    BOOST_TEST(e5 == dlock::error::invalid_option, e5.message());  // every store: 1..2^40
}

}  // namespace dlock::test::latch
