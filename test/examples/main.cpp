// SPDX-License-Identifier: BSL-1.0
#define BOOST_TEST_MODULE dlock_examples
#include <boost/test/unit_test.hpp>
