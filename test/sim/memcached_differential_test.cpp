// SPDX-License-Identifier: BSL-1.0
// The memcached model against a real memcached: the store's own machines of steps
// (acquire_steps, owner_steps) take, renew and release one name for a few tokens in a random
// order, and every step's bytes go both to the server (over a plain socket) and to the model;
// every reply must agree, its kind, value, CAS id and remaining TTL included. The server's
// replies drive the machines.
#include "common/memcached_server.hpp"
#include "memcached/acquire_steps.hpp"
#include "memcached/owner_steps.hpp"
#include "memcached_model.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/test/unit_test.hpp>

#include <random>

namespace asio = boost::asio;
namespace proto = dlock::memcached::proto;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_SUITE(simulation_memcached_differential)

BOOST_AUTO_TEST_CASE(the_model_answers_as_memcached_does)
{
    dlock::test::memcached_server srv;
    asio::io_context io;
    asio::ip::tcp::socket sock(io);
    sock.connect({asio::ip::make_address("127.0.0.1"), srv.port()});
    proto::parser parser;
    // The server's replies to `bytes`: `n` of them.
    auto exchange = [&](const std::string& bytes, std::size_t n) {
        asio::write(sock, asio::buffer(bytes));
        std::vector<proto::reply> out;
        boost::system::error_code ec;
        while (out.size() < n) {
            while (auto r = parser.next(ec))
                out.push_back(*r);
            BOOST_REQUIRE(!ec);
            if (out.size() >= n)
                break;
            char buf[4096];
            auto got = sock.read_some(asio::buffer(buf));
            parser.feed(std::string_view(buf, got));
        }
        return out;
    };
    dlock::sim::memcached_model model;
    dlock::memcached::name_keys keys;
    keys.lock_text = "sim:lock:x";
    keys.lock = proto::encode_key(keys.lock_text);
    keys.fence = proto::encode_key("sim:fence:x");
    keys.contended = proto::encode_key("sim:contended:x");
    const std::vector<std::string> tokens{"t0", "t1", "t2"};
    dlock::sim::real_time now{0};  // the model's clock stands still: no lease runs out (6 s)
    int steps = 0, granted = 0;
    // Runs a machine to its end against both; every reply compared.
    auto drive = [&](auto& m) {
        while (m.current() != std::decay_t<decltype(m)>::step::done) {
            auto bytes = m.bytes();
            auto real = exchange(bytes, m.replies());
            auto mine = model.execute(bytes, now);
            BOOST_TEST_REQUIRE(real.size() == mine.size());
            for (std::size_t i = 0; i < real.size(); ++i) {
                BOOST_TEST((real[i].k == mine[i].k), "step " << steps << ": " << bytes);
                BOOST_TEST(real[i].data == mine[i].data, "step " << steps << ": " << bytes);
                BOOST_TEST(real[i].number('c').value_or(-2) == mine[i].number('c').value_or(-2),
                           "step " << steps << " CAS: " << bytes);
                BOOST_TEST(real[i].number('t').value_or(-2) == mine[i].number('t').value_or(-2),
                           "step " << steps << " TTL: " << bytes);
            }
            m.on_replies(real);
            ++steps;
        }
    };
    std::mt19937 rng(20261128);
    for (int i = 0; i < 200; ++i) {
        const auto& tok = tokens[rng() % tokens.size()];
        switch (rng() % 3) {
        case 0: {
            dlock::memcached::acquire_steps m(keys, tok, 5000ms);
            drive(m);
            BOOST_TEST(!m.error());
            granted += m.result().acquired;
            break;
        }
        case 1: {
            dlock::memcached::owner_steps m(dlock::memcached::owner_steps::op::renew, keys, tok, 5000ms);
            drive(m);
            BOOST_TEST(!m.error());
            break;
        }
        default: {
            dlock::memcached::owner_steps m(dlock::memcached::owner_steps::op::release, keys, tok);
            drive(m);
            BOOST_TEST(!m.error());
        }
        }
    }
    BOOST_TEST(steps > 300);
    BOOST_TEST(granted > 10);
}

BOOST_AUTO_TEST_SUITE_END()
