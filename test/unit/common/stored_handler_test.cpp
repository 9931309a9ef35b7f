// SPDX-License-Identifier: BSL-1.0
// stored_handler: every way a kept handler is moved (assignment, swap, a vector's erase from
// the front, std::optional) completes the right handler exactly once, and the associators
// reach the wrapped handler. Each of these recursed until the stack was gone with a raw
// any_completion_handler on Boost 1.81.
#include "common/post_completion.hpp"
#include "common/stored_handler.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/container/devector.hpp>
#include <boost/container/small_vector.hpp>
#include <boost/test/unit_test.hpp>

#include <optional>
#include <utility>
#include <vector>

namespace asio = boost::asio;
using boost::system::error_code;
using dlock::detail::stored_handler;

namespace {

using handler = stored_handler<void(error_code, int)>;

// Handler `i` records that it ran, with what, in `calls[i]`.
struct recorder {
    std::vector<std::vector<int>> calls;
    explicit recorder(std::size_t n) : calls(n) {}
    asio::any_completion_handler<void(error_code, int)> make(std::size_t i)
    {
        return [this, i](error_code, int v) { calls[i].push_back(v); };
    }
    // Each handler ran once, with its own index as the value.
    void check_each_once() const
    {
        for (std::size_t i = 0; i < calls.size(); ++i) {
            BOOST_TEST_CONTEXT("handler " << i)
            {
                BOOST_TEST(calls[i].size() == 1u);
                if (calls[i].size() == 1u)
                    BOOST_TEST(calls[i][0] == static_cast<int>(i));
            }
        }
    }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(stored_handler_suite)

BOOST_AUTO_TEST_CASE(move_assignment_many_times_keeps_one_handler)
{
    recorder r(2);
    handler a = r.make(0), b = r.make(1);
    for (int i = 0; i < 10'000; ++i) {
        handler t = std::move(a);
        a = std::move(b);
        b = std::move(t);
    }
    a = std::move(a);  // self-assignment keeps it
    BOOST_TEST(static_cast<bool>(a));
    BOOST_TEST(static_cast<bool>(b));
    std::move(a)(error_code(), 0);  // after an even number of swaps, a holds handler 0 again
    std::move(b)(error_code(), 1);
    BOOST_TEST(!a);
    BOOST_TEST(!b);
    r.check_each_once();
}

BOOST_AUTO_TEST_CASE(assigning_over_a_handler_destroys_the_old_one_uncalled)
{
    recorder r(2);
    handler a = r.make(0);
    a = r.make(1);  // from an rvalue any_completion_handler
    std::move(a)(error_code(), 1);
    BOOST_TEST(r.calls[0].empty());
    BOOST_TEST(r.calls[1].size() == 1u);
    a = nullptr;
    BOOST_TEST(!a);
    a = {};
    BOOST_TEST(!a);
}

BOOST_AUTO_TEST_CASE(swap_and_exchange)
{
    recorder r(3);
    handler a = r.make(1), b = r.make(0);
    std::swap(a, b);
    using std::swap;
    swap(a, b);
    swap(a, b);  // three swaps: a holds 0, b holds 1
    auto old = std::exchange(a, r.make(2));
    std::move(old)(error_code(), 0);
    std::move(b)(error_code(), 1);
    std::move(a)(error_code(), 2);
    r.check_each_once();
}

// What the driver's release waiters did when the first of two replies came first: erasing
// any element but the last moves the later ones down by move assignment.
BOOST_AUTO_TEST_CASE(containers_erase_from_the_front_and_the_middle)
{
    constexpr int n = 64;
    recorder r(3 * n);
    using entry = std::pair<int, handler>;
    std::vector<entry> v;
    boost::container::small_vector<entry, 1> sv;
    boost::container::devector<entry> dv;
    for (int i = 0; i < n; ++i) {
        v.emplace_back(i, r.make(i));
        sv.emplace_back(n + i, r.make(n + i));
        dv.emplace_back(2 * n + i, r.make(2 * n + i));
    }
    auto complete = [](auto& c, auto it) {
        auto e = std::move(*it);
        c.erase(it);
        std::move(e.second)(error_code(), e.first);
    };
    while (!v.empty()) {
        complete(v, v.begin());
        complete(sv, sv.begin());
        complete(dv, dv.begin() + static_cast<std::ptrdiff_t>(dv.size() / 2));
    }
    BOOST_TEST(sv.empty());
    BOOST_TEST(dv.empty());
    r.check_each_once();
}

BOOST_AUTO_TEST_CASE(optional_assignment_and_struct_moves)
{
    recorder r(3);
    struct waiter {
        int id = 0;
        handler h;
    };
    std::optional<waiter> o = waiter{0, handler(r.make(0))};
    std::optional<waiter> p = waiter{2, handler(r.make(2))};
    waiter w{1, handler(r.make(1))};
    std::swap(*o, w);  // a struct holding one is move-assigned by swap: o holds 1, w holds 0
    std::move(w.h)(error_code(), w.id);
    std::move(p->h)(error_code(), p->id);
    p = std::move(o);  // both engaged: the struct's move assignment
    std::move(p->h)(error_code(), p->id);
    r.check_each_once();
}

// post_completion and dispatch see the wrapped handler's executor and cancellation slot.
BOOST_AUTO_TEST_CASE(associators_reach_the_wrapped_handler)
{
    asio::io_context io;
    auto strand = asio::make_strand(io);
    asio::cancellation_signal sig;
    bool ran = false, in_strand = false;
    handler h(asio::any_completion_handler<void(error_code, int)>(
        asio::bind_cancellation_slot(sig.slot(), asio::bind_executor(strand, [&](error_code ec, int v) {
                                         ran = !ec && v == 7;
                                         in_strand = strand.running_in_this_thread();
                                     }))));
    BOOST_TEST(asio::get_associated_cancellation_slot(h).is_connected());
    BOOST_TEST((asio::get_associated_executor(h, io.get_executor()) == asio::any_completion_executor(strand)));
    handler moved;
    moved = std::move(h);
    dlock::detail::post_completion(io.get_executor(), std::move(moved), error_code(), 7);
    io.run();
    BOOST_TEST(ran);
    BOOST_TEST(in_strand);
}

// A lambda or another handler type goes in through the explicit converting constructor.
BOOST_AUTO_TEST_CASE(takes_any_handler_and_gives_it_back)
{
    int got = 0;
    handler h([&](error_code, int v) { got = v; });
    asio::any_completion_handler<void(error_code, int)> raw = h.take();
    BOOST_TEST(!h);
    std::move(raw)(error_code(), 3);
    BOOST_TEST(got == 3);
    static_assert(!std::is_copy_constructible_v<handler>);
    static_assert(!std::is_copy_assignable_v<handler>);
    static_assert(std::is_nothrow_move_assignable_v<handler>);
    // An lvalue any_completion_handler must be moved in explicitly: it does not convert.
    static_assert(!std::is_constructible_v<handler, asio::any_completion_handler<void(error_code, int)>&>);
}

BOOST_AUTO_TEST_SUITE_END()
