// SPDX-License-Identifier: BSL-1.0
// The one-block allocator of a connection's read and write: reuse, growth, and a second
// operation at once served by the heap without disturbing the first.
#include "common/slot_allocator.hpp"

#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <functional>
#include <memory>

using dlock::detail::op_slot;
using dlock::detail::slot_allocator;

BOOST_AUTO_TEST_SUITE(slot_allocator_suite)

BOOST_AUTO_TEST_CASE(one_block_reused_and_grown)
{
    op_slot slot;
    slot_allocator<char> a(slot);
    char* first = a.allocate(100);
    BOOST_TEST(slot.busy());
    std::memset(first, 1, 100);
    a.deallocate(first, 100);
    BOOST_TEST(!slot.busy());
    char* again = a.allocate(60);  // smaller: the same block
    BOOST_TEST(static_cast<void*>(again) == static_cast<void*>(first));
    a.deallocate(again, 60);
    char* bigger = a.allocate(4000);  // larger: a new block, which is then kept
    std::memset(bigger, 2, 4000);
    a.deallocate(bigger, 4000);
    char* kept = a.allocate(4000);
    BOOST_TEST(static_cast<void*>(kept) == static_cast<void*>(bigger));
    a.deallocate(kept, 4000);
}

BOOST_AUTO_TEST_CASE(a_second_operation_at_once_goes_to_the_heap)
{
    op_slot slot;
    slot_allocator<int> a(slot);
    int* held = a.allocate(8);
    int* other = a.allocate(8);
    BOOST_TEST(held != other);
    held[7] = 1;
    other[7] = 2;
    a.deallocate(other, 8);  // the heap block: the slot stays taken by `held`
    BOOST_TEST(slot.busy());
    BOOST_TEST(held[7] == 1);
    a.deallocate(held, 8);
    BOOST_TEST(!slot.busy());
    // Rebound copies share the slot.
    slot_allocator<double> d(a);
    BOOST_TEST((d == a));
    double* x = d.allocate(1);
    BOOST_TEST(static_cast<void*>(x) == static_cast<void*>(held));
    d.deallocate(x, 1);
}

// Asio places an operation bound to the allocator in the slot, and frees it before the
// handler runs: a handler that starts the next operation finds the slot free again.
BOOST_AUTO_TEST_CASE(asio_operations_use_the_slot_one_after_another)
{
    boost::asio::io_context io;
    op_slot slot;
    int runs = 0;
    bool busy_in_handler = false;
    std::function<void()> next = [&] {
        boost::asio::post(io, boost::asio::bind_allocator(slot_allocator<void>(slot), [&] {
                              busy_in_handler = busy_in_handler || slot.busy();
                              if (++runs < 3)
                                  next();
                          }));
        BOOST_TEST(slot.busy());  // the posted operation lives in the slot
    };
    next();
    io.run();
    BOOST_TEST(runs == 3);
    BOOST_TEST(!busy_in_handler);
    BOOST_TEST(!slot.busy());
}

BOOST_AUTO_TEST_SUITE_END()
