// SPDX-License-Identifier: BSL-1.0
// The one completion rule (include/dlock/detail/completion.hpp) that the registry's objects
// and the Redis connection share: in place for a handler with no executor of its own or with
// the I/O's own, dispatched for any other, posted (never inline) for an empty handle.
#include <dlock/detail/completion.hpp>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/test/unit_test.hpp>

namespace asio = boost::asio;
using dlock::detail::completes_in_place;
using dlock::detail::has_own_executor;

namespace {
auto plain = [](int) {};
}

BOOST_AUTO_TEST_SUITE(completion_rule)

BOOST_AUTO_TEST_CASE(a_handler_has_its_own_executor_only_when_bound)
{
    asio::io_context io;
    BOOST_TEST(!has_own_executor<decltype(plain)>);
    BOOST_TEST(has_own_executor<decltype(asio::bind_executor(io.get_executor(), plain))>);
    BOOST_TEST(has_own_executor<decltype(asio::bind_executor(asio::make_strand(io), plain))>);
}

BOOST_AUTO_TEST_CASE(in_place_for_none_or_the_same_executor_only)
{
    asio::io_context io, other;
    const asio::any_io_executor ex = io.get_executor();
    BOOST_TEST(completes_in_place(plain, ex));
    BOOST_TEST(completes_in_place(asio::bind_executor(ex, plain), ex));
    BOOST_TEST(!completes_in_place(asio::bind_executor(asio::any_io_executor(other.get_executor()), plain), ex));
    BOOST_TEST(!completes_in_place(asio::bind_executor(asio::make_strand(io), plain), ex));
    BOOST_TEST(!completes_in_place(asio::bind_executor(other.get_executor(), plain), ex));
}

BOOST_AUTO_TEST_CASE(an_empty_handle_posts_never_inline)
{
    asio::io_context io;
    int got = 0;
    dlock::detail::post_to_handler(asio::bind_executor(io.get_executor(), [&](int v) { got = v; }), 7);
    BOOST_TEST(got == 0);  // not run by the call itself
    io.poll();
    BOOST_TEST(got == 7);
}

BOOST_AUTO_TEST_SUITE_END()
