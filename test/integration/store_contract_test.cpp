// One contract, every store: the same checks run against memory_store and redis_store.
#include <dlock/error.hpp>
#include <dlock/memory_store.hpp>
#include <dlock/redis/store.hpp>

#include "common/redis_server.hpp"
#include "integration/store_contract.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using dlock::test::run_contract;

BOOST_AUTO_TEST_SUITE(store_contract)

BOOST_AUTO_TEST_CASE(memory_store)
{
    asio::io_context io;
    dlock::memory_store st(io.get_executor());
    run_contract(io, st, [] {});
}

BOOST_AUTO_TEST_CASE(memory_store_direct_handoff)
{
    asio::io_context io;
    dlock::memory_store st(io.get_executor(), true);
    run_contract(io, st, [] {});
}

BOOST_AUTO_TEST_CASE(redis_store)
{
    dlock::test::redis_server srv;
    asio::io_context io;
    dlock::redis_store st(io.get_executor(), srv.config());
    run_contract(io, st, [&] {
        st.close();
    });
    // Keys stay in one slot per name, and the fencing counter is per slot, not per name.
    BOOST_TEST(dlock::key_slot(st.lock_key("a")) == dlock::key_slot(st.fence_key("a")));
    BOOST_TEST(dlock::key_slot(st.lock_key("a")) == dlock::key_slot(st.channel("a")));
    BOOST_TEST(dlock::key_slot("{user1000}.following") == dlock::key_slot("user1000"));
    BOOST_TEST(dlock::key_slot("123456789") == 12739u);  // CRC16/XMODEM check value 0x31C3
}

BOOST_AUTO_TEST_SUITE_END()
