// SPDX-License-Identifier: BSL-1.0
#define BOOST_TEST_MODULE dlock_integration
#include <boost/test/unit_test.hpp>
