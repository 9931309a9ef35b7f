// SPDX-License-Identifier: BSL-1.0
// The contract suite for one backend: linked with that backend's make_contract_subject()
// by dlock_add_contract_test() in test/CMakeLists.txt. The test cases share one subject (its
// servers start once); the store contract comes last, as it closes the store.
#include "integration/contract_subject.hpp"
#include "integration/store_contract.hpp"

#include <unistd.h>

namespace {

struct shared_subject {
    boost::asio::io_context io;
    dlock::test::contract_subject subject = dlock::test::make_contract_subject(io);
};

shared_subject& shared()
{
    static shared_subject s;
    return s;
}

}  // namespace

BOOST_AUTO_TEST_CASE(handoff_then_a_hold_of_several_leases)
{
    auto& s = shared();
    BOOST_TEST_REQUIRE(s.subject.store != nullptr);
    // Two stores of their own where the backend makes them: a per-session store's session
    // takes its length from its first lease, which must not be this scenario's for the
    // contract's checks.
    auto one = s.subject.another ? s.subject.another() : nullptr;
    auto two = s.subject.another ? s.subject.another() : nullptr;
    auto& first = one ? *one : *s.subject.store;
    auto& second = two ? *two : *s.subject.store;
    bool finished = false;
    boost::asio::co_spawn(s.io,
                          dlock::test::check_handoff_then_long_hold(first, second,
                                                                    "handoff-hold:" + std::to_string(::getpid())),
                          [&](std::exception_ptr e) {
                              finished = true;
                              if (e)
                                  std::rethrow_exception(e);
                          });
    for (int i = 0; i < 600 && !finished; ++i) {
        s.io.restart();
        s.io.run_for(std::chrono::milliseconds(100));
    }
    BOOST_TEST(finished);
    for (auto* st : {one.get(), two.get()})
        if (st)
            st->close();
    s.io.restart();
    s.io.run_for(std::chrono::milliseconds(100));  // its last requests and callbacks
}

BOOST_AUTO_TEST_CASE(store_contract)
{
    auto& s = shared();
    BOOST_TEST_REQUIRE(s.subject.store != nullptr);
    s.io.restart();
    dlock::test::run_contract(
        s.io, *s.subject.store, s.subject.stop ? s.subject.stop : [] {}, s.subject.other.get(), s.subject.keys_of);
}
