// SPDX-License-Identifier: BSL-1.0
// The lease rules (src/core/lease_policy) and the shared backoff (src/common/backoff.hpp):
// pure functions, fed values directly.
#include <dlock/error.hpp>

#include "common/backoff.hpp"
#include "core/lease_policy.hpp"

#include <boost/test/unit_test.hpp>

using namespace std::chrono_literals;
using dlock::lock_config;
using dlock::store_traits;
using namespace dlock::detail;

BOOST_AUTO_TEST_SUITE(lease_policy_suite)

BOOST_AUTO_TEST_CASE(derived_values)
{
    lock_config c;
    c.lease = 30s;
    BOOST_TEST(effective_drift(c).count() == 302);  // lease/100 + 2 ms
    BOOST_TEST(effective_renew_interval(c).count() == 10'000);
    c.drift = 50ms;
    c.renew_interval = 2s;
    BOOST_TEST(effective_drift(c).count() == 50);
    BOOST_TEST(effective_renew_interval(c).count() == 2'000);
}

BOOST_AUTO_TEST_CASE(validation_against_settings)
{
    lock_config c;
    BOOST_TEST(!validate_config(c));
    c.lease = 0ms;
    BOOST_TEST(validate_config(c) == dlock::error::invalid_lease);
    c.lease = 3ms;  // shorter than its own drift margin
    BOOST_TEST(validate_config(c) == dlock::error::invalid_lease);
    c.lease = std::chrono::milliseconds::max();  // the clock arithmetic would overflow
    BOOST_TEST(validate_config(c) == dlock::error::invalid_lease);
    c.lease = 30s;
    c.renew_interval = 30s;  // the watchdog could never renew in time
    BOOST_TEST(validate_config(c) == dlock::error::invalid_lease);
    c.watchdog = false;  // ... which a fixed lease does not need
    BOOST_TEST(!validate_config(c));
    c.drift = -1ms;
    BOOST_TEST(validate_config(c) == dlock::error::invalid_lease);
    c = {};
    c.backoff_min = 0ms;
    BOOST_TEST(validate_config(c) == dlock::error::invalid_option);
    c.backoff_min = 10ms;
    c.backoff_max = 5ms;
    BOOST_TEST(validate_config(c) == dlock::error::invalid_option);
}

BOOST_AUTO_TEST_CASE(validation_against_the_store)
{
    lock_config c;
    store_traits t;
    t.max_ttl = 10s;
    BOOST_TEST(validate_config(c, t) == dlock::error::invalid_lease);  // 30 s > 10 s
    t.max_ttl = 60s;
    t.min_ttl = 2s;
    t.ttl_granularity = 1s;
    BOOST_TEST(!validate_config(c, t));
    c.lease = 1500ms;
    BOOST_TEST(validate_config(c, t) == dlock::error::invalid_lease);  // below the minimum
    c.lease = 2500ms;
    BOOST_TEST(validate_config(c, t) == dlock::error::invalid_lease);  // not whole seconds
}

BOOST_AUTO_TEST_CASE(names)
{
    lock_config c;
    c.max_name_length = 4;
    BOOST_TEST(validate_name(c, "") == dlock::error::invalid_name);
    BOOST_TEST(validate_name(c, "abcde") == dlock::error::invalid_name);
    BOOST_TEST(!validate_name(c, "abcd"));
}

BOOST_AUTO_TEST_CASE(backoff_doubles_caps_and_jitters_within_half)
{
    std::minstd_rand rng(7);
    backoff b(10ms, 80ms);
    std::vector<long long> steps;
    for (int i = 0; i < 6; ++i) {
        auto step = b.step();
        auto d = b.next(rng);
        BOOST_TEST(d.count() >= step.count() / 2);
        BOOST_TEST(d.count() <= step.count());
        steps.push_back(step.count());
    }
    BOOST_TEST((steps == std::vector<long long>{10, 20, 40, 80, 80, 80}));
    b.reset();
    BOOST_TEST(b.step().count() == 10);
    BOOST_TEST(equal_jitter(1ms, rng).count() == 1);
}

// The byte-sized count the lock's machine keeps draws the same steps and the same jitter.
BOOST_AUTO_TEST_CASE(backoff_count_steps_as_backoff_does)
{
    for (auto [lo, hi] : {std::pair{10ms, 80ms}, {5ms, 1000ms}, {0ms, 10ms}, {30ms, 20ms}}) {
        std::minstd_rand r1(3), r2(3);
        backoff b(lo, hi);
        backoff_count c;
        for (int i = 0; i < 80; ++i) {
            BOOST_TEST(c.step(lo, hi).count() == b.step().count());
            BOOST_TEST(c.next(lo, hi, r2).count() == b.next(r1).count());
            if (i == 40) {
                b.reset();
                c.reset();
            }
        }
    }
}

BOOST_AUTO_TEST_SUITE_END()
