// SPDX-License-Identifier: BSL-1.0
// The driver's paths that move a kept completion handler: two releases of one name pending
// whose first reply comes first, and the read side's many holders. Each crashed (stack
// exhausted) when a raw any_completion_handler was kept (issue 29, item 3).
#include <dlock/error.hpp>
#include <dlock/memory_store.hpp>
#include <dlock/registry.hpp>

#include "common/stored_handler.hpp"
#include "unit/memory_fixture.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <deque>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using boost::system::error_code;

namespace {

/// A memory store whose release replies are held back until `hold` of them are waiting, then
/// delivered in the order the releases were sent: two releases of one name in flight at once,
/// the first answered first, as a network store does.
class held_release_store final : public dlock::store {
public:
    held_release_store(dlock::memory_store& inner, std::size_t hold) : inner_(inner), hold_(hold) {}

    asio::any_io_executor get_executor() const override { return inner_.get_executor(); }
    dlock::store_traits traits() const noexcept override { return inner_.traits(); }
    std::string describe() const override { return "held releases over " + inner_.describe(); }
    using store::watch;
    watch_id watch(const std::string& name, const std::string& token, watch_callback cb) override
    {
        return inner_.watch(name, token, std::move(cb));
    }
    void unwatch(watch_id id) override { inner_.unwatch(id); }

    std::size_t delivered = 0;  // release replies let go
    std::size_t most_held = 0;  // the most release replies held at once

private:
    void do_try_acquire(const dlock::lease_request& req, asio::any_completion_handler<acquire_signature> h) override
    {
        inner_.async_try_acquire(req, std::move(h));
    }
    void do_renew(const dlock::lease_key& key, std::chrono::milliseconds ttl,
                  asio::any_completion_handler<renew_signature> h) override
    {
        inner_.async_renew(key, ttl, std::move(h));
    }
    void do_release(const dlock::lease_key& key, asio::any_completion_handler<bool_signature> h) override
    {
        inner_.async_release(key, [this, h = std::move(h)](error_code ec, bool owned) mutable {
            held_.emplace_back([h = std::move(h), ec, owned]() mutable { std::move(h)(ec, owned); });
            most_held = std::max(most_held, held_.size());
            if (held_.size() < hold_)
                return;
            while (!held_.empty()) {
                auto next = std::move(held_.front());
                held_.pop_front();
                ++delivered;
                asio::post(inner_.get_executor(), std::move(next));
            }
        });
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
    std::size_t hold_;
    std::deque<dlock::detail::stored_handler<void()>> held_;
};

using fixture = dlock::test::memory_fixture;

}  // namespace

BOOST_FIXTURE_TEST_SUITE(handler_moves_suite, fixture)

// With no local hand-off (handoff_budget = 0), A's release goes to the store and B's acquire
// right behind it; B then releases while A's release reply is still on its way. A's reply
// arrives first: the first of two pending releases completes, and the second's waiter is
// moved down in the driver's list by move assignment (a stack overflow before stored_handler).
BOOST_AUTO_TEST_CASE(two_releases_of_one_name_pending_the_first_answered_first)
{
    held_release_store held(store, 2);
    dlock::registry reg(held, {.lease = 5s, .handoff_budget = 0});
    std::vector<std::string> order;
    error_code ec_a = dlock::error::not_held, ec_b = dlock::error::not_held;
    std::uint64_t fence_a = 0, fence_b = 0;
    spawn([&]() -> asio::awaitable<void> {
        auto g = co_await reg.obtain("x").acquire();
        fence_a = g.fencing_token();
        order.push_back("A holds");
        co_await g.release(asio::redirect_error(asio::use_awaitable, ec_a));
        order.push_back("A released");
    });
    spawn([&]() -> asio::awaitable<void> {
        auto g = co_await reg.obtain("x").acquire();
        fence_b = g.fencing_token();
        order.push_back("B holds");
        co_await g.release(asio::redirect_error(asio::use_awaitable, ec_b));
        order.push_back("B released");
    });
    run(10s);
    BOOST_TEST(held.most_held == 2u);  // both releases were pending at once
    BOOST_TEST(held.delivered == 2u);
    BOOST_TEST(!ec_a);
    BOOST_TEST(!ec_b);
    BOOST_TEST(fence_a > 0u);
    BOOST_TEST(fence_b > fence_a);
    std::vector<std::string> want{"A holds", "B holds", "A released", "B released"};
    BOOST_TEST(order == want, boost::test_tools::per_element());
    BOOST_TEST(store.size() == 0u);
}

// Many of one registry's coroutines on one name's read side: its holders come and go
// in every order, and their releases with them (issue 29: 16 x 20,000 on Redis crashed).
BOOST_AUTO_TEST_CASE(many_readers_loop_on_one_name)
{
    for (bool direct : {false, true}) {
        BOOST_TEST_CONTEXT("direct_handoff " << direct)
        {
            asio::io_context io;
            dlock::memory_store mem(io.get_executor(), direct);
            dlock::registry reg(mem, {.lease = 5s});
            auto rw = reg.obtain_rw("hot");
            constexpr int coroutines = 16, rounds = 1'000;
            int cycles = 0, finished = 0;
            std::vector<error_code> errors;
            for (int c = 0; c < coroutines; ++c)
                asio::co_spawn(
                    io,
                    [&]() -> asio::awaitable<void> {
                        for (int i = 0; i < rounds; ++i) {
                            auto g = co_await rw.read().acquire();
                            error_code ec;
                            co_await g.release(asio::redirect_error(asio::use_awaitable, ec));
                            if (ec)
                                errors.push_back(ec);
                            ++cycles;
                        }
                        ++finished;
                    },
                    [](std::exception_ptr e) {
                        if (e)
                            std::rethrow_exception(e);
                    });
            io.run_for(20s);
            BOOST_TEST(finished == coroutines);
            BOOST_TEST(cycles == coroutines * rounds);
            BOOST_TEST(errors.empty());
        }
    }
}

BOOST_AUTO_TEST_SUITE_END()
