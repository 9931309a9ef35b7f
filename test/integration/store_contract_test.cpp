// SPDX-License-Identifier: BSL-1.0
// The contract suite on memory_store without hand-off (the other stores run it through
// dlock_add_contract_test), and the Redis key layout.
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

// (memory_store with direct hand-off and redis_store run the suite through
// dlock_add_contract_test: test/integration/contract_memory.cpp, contract_redis.cpp.)

// Keys stay in one slot per name, and the fencing counter is per slot, not per name.
BOOST_AUTO_TEST_CASE(redis_keys_share_a_slot_per_name)
{
    asio::io_context io;
    dlock::redis_store st(io.get_executor(), dlock::redis::config{});
    BOOST_TEST(dlock::key_slot(st.lock_key("a")) == dlock::key_slot(st.fence_key("a")));
    BOOST_TEST(dlock::key_slot(st.lock_key("a")) == dlock::key_slot(st.channel("a")));
    BOOST_TEST(dlock::key_slot("{user1000}.following") == dlock::key_slot("user1000"));
    BOOST_TEST(dlock::key_slot("123456789") == 12739u);  // CRC16/XMODEM check value 0x31C3
}

BOOST_AUTO_TEST_SUITE_END()
