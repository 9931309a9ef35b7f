// SPDX-License-Identifier: BSL-1.0
// Capabilities: what a store declares it serves (its lease kinds, the latch and election
// interfaces it hands out: store::capabilities()), and a
// registry built with lock_config::needs refusing a store that lacks one at construction
// (registry::config_error()), so that nothing waits for a first use to find out.
#include <dlock/capabilities.hpp>
#include <dlock/election.hpp>
#include <dlock/error.hpp>
#include <dlock/latch.hpp>
#include <dlock/memory_store.hpp>
#include <dlock/registry.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using boost::system::error_code;
using dlock::capability;

namespace {

// A memory store that says it serves the mutex only (as etcd, ZooKeeper, the SQL stores
// and memcached do today).
class mutex_only_store final : public dlock::store {
public:
    explicit mutex_only_store(dlock::memory_store& inner) : inner_(inner) {}
    asio::any_io_executor get_executor() const override { return inner_.get_executor(); }
    dlock::store_traits traits() const noexcept override { return dlock::store_traits{}; }
    std::string describe() const override { return "mutex only"; }
    using store::watch;
    watch_id watch(const std::string& name, const std::string& token, watch_callback cb) override
    {
        return inner_.watch(name, token, std::move(cb));
    }
    void unwatch(watch_id id) override { inner_.unwatch(id); }
    std::size_t attempts = 0;

private:
    void do_try_acquire(const dlock::lease_request& req, asio::any_completion_handler<acquire_signature> h) override
    {
        ++attempts;
        inner_.async_try_acquire(req, std::move(h));
    }
    void do_renew(const dlock::lease_key& key, std::chrono::milliseconds ttl,
                  asio::any_completion_handler<renew_signature> h) override
    {
        inner_.async_renew(key, ttl, std::move(h));
    }
    void do_release(const dlock::lease_key& key, asio::any_completion_handler<bool_signature> h) override
    {
        inner_.async_release(key, std::move(h));
    }
    void do_force_release(const std::string& name, dlock::lease_kind side,
                          asio::any_completion_handler<bool_signature> h) override
    {
        inner_.async_force_release(name, side, std::move(h));
    }
    void do_status(const std::string& name, asio::any_completion_handler<status_signature> h) override
    {
        inner_.async_status(name, std::move(h));
    }
    dlock::memory_store& inner_;
};

// The error of one acquire of `name` on `reg`, run to its end.
error_code acquire_error(asio::io_context& io, dlock::registry& reg, const std::string& name)
{
    error_code out = dlock::error::timeout;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            auto lk = reg.obtain(name);
            auto [ec, g] = co_await lk.acquire(asio::as_tuple(asio::use_awaitable));
            out = ec;
            if (!ec)
                co_await g.release(asio::as_tuple(asio::use_awaitable));
        },
        asio::detached);
    io.restart();
    io.run();
    return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(capabilities)

BOOST_AUTO_TEST_CASE(a_store_says_what_it_serves)
{
    dlock::store_traits t;
    BOOST_TEST(dlock::capabilities_of(t) == 0u);  // the mutex only
    t.kinds |= static_cast<unsigned>(dlock::lease_kind::read);
    BOOST_TEST(dlock::capabilities_of(t) == 0u);  // a read lease without a write lease is no read-write lock
    t.kinds |= static_cast<unsigned>(dlock::lease_kind::write) | static_cast<unsigned>(dlock::lease_kind::permit);
    BOOST_TEST(dlock::capabilities_of(t) == (capability::read_write | capability::semaphore));
    // Latches and elections are interfaces a store implements and hands out.
    asio::io_context io;
    dlock::memory_store mem(io.get_executor());
    BOOST_TEST(mem.capabilities() ==
               (capability::read_write | capability::semaphore | capability::latch | capability::election));
    BOOST_TEST(mem.latches() == static_cast<dlock::latch_capability*>(&mem));
    BOOST_TEST(mem.elections() == static_cast<dlock::election_capability*>(&mem));
    mutex_only_store st(mem);
    BOOST_TEST(st.capabilities() == 0u);
    BOOST_TEST(!st.latches());
    BOOST_TEST(!st.elections());
}

BOOST_AUTO_TEST_CASE(a_registry_refuses_a_store_that_lacks_what_it_needs_when_built)
{
    asio::io_context io;
    dlock::memory_store mem(io.get_executor());
    mutex_only_store st(mem);
    dlock::registry plain(st, {.lease = 5s});
    BOOST_TEST(!plain.config_error());
    BOOST_TEST(!acquire_error(io, plain, "a"));
    BOOST_TEST(st.attempts == 1u);

    dlock::lock_config cfg{.lease = 5s};
    cfg.needs = capability::semaphore | capability::latch;
    dlock::registry needy(st, cfg);
    BOOST_TEST((needy.config_error() == dlock::error::not_supported));  // known before any use
    BOOST_TEST((acquire_error(io, needy, "a") == dlock::error::not_supported));
    BOOST_TEST(st.attempts == 1u);  // refused without asking the store

    dlock::registry on_memory(mem, cfg);  // a store that serves both
    BOOST_TEST(!on_memory.config_error());
}

BOOST_AUTO_TEST_CASE(a_latch_on_a_store_without_latches_fails_without_a_round_trip)
{
    asio::io_context io;
    dlock::memory_store mem(io.get_executor());
    mutex_only_store st(mem);
    dlock::registry reg(st, {.lease = 5s});
    dlock::latch l(reg, "gate", 2);
    error_code got = dlock::error::timeout;
    l.count_down([&](error_code ec, std::uint64_t) { got = ec; });
    io.run();
    BOOST_TEST((got == dlock::error::not_supported));
}

BOOST_AUTO_TEST_CASE(an_election_on_a_store_without_elections_fails_not_supported)
{
    asio::io_context io;
    dlock::memory_store mem(io.get_executor());
    mutex_only_store st(mem);
    dlock::registry reg(st, {.lease = 5s});
    dlock::election e(reg, "chair");
    error_code got = dlock::error::timeout, campaigned = dlock::error::timeout;
    e.leader([&](error_code ec, dlock::leader_info) { got = ec; });
    e.campaign("me", [&](error_code ec, dlock::leadership) { campaigned = ec; });
    io.run();
    BOOST_TEST((got == dlock::error::not_supported));
    BOOST_TEST((campaigned == dlock::error::not_supported));
    BOOST_TEST(st.attempts == 0u);  // refused before taking the lock it would have proclaimed under
}

BOOST_AUTO_TEST_SUITE_END()
