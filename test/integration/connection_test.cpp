#include <dlock/error.hpp>
#include <dlock/redis/connection.hpp>

#include "common/redis_server.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

namespace asio = boost::asio;
using namespace dlock;

BOOST_AUTO_TEST_SUITE(connection_suite)

BOOST_AUTO_TEST_CASE(ping_roundtrip)
{
    test::redis_server srv;
    asio::io_context io;
    redis::connection conn(io.get_executor(), srv.config());
    bool done = false;
    asio::co_spawn(io, [&]() -> asio::awaitable<void> {
        redis::request req;
        req.push("PING");
        req.push("SET", "k", "v");
        req.push("GET", "k");
        auto resp = co_await conn.async_exec(req);
        BOOST_TEST(resp.size() == 3u);
        BOOST_TEST(resp[0].str == "PONG");
        BOOST_TEST(resp[2].str == "v");
        done = true;
        conn.close();
    }, asio::detached);
    io.run_for(std::chrono::seconds(10));
    BOOST_TEST(done);
}

BOOST_AUTO_TEST_SUITE_END()
