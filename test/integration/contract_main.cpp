// SPDX-License-Identifier: BSL-1.0
// The contract suite for one backend: linked with that backend's make_contract_subject()
// by dlock_add_contract_test() in test/CMakeLists.txt.
#include "integration/contract_subject.hpp"
#include "integration/store_contract.hpp"

BOOST_AUTO_TEST_CASE(store_contract)
{
    boost::asio::io_context io;
    auto subject = dlock::test::make_contract_subject(io);
    BOOST_TEST_REQUIRE(subject.store != nullptr);
    dlock::test::run_contract(
        io, *subject.store, subject.stop ? subject.stop : [] {}, subject.other.get(), subject.keys_of);
}
