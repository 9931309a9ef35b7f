#define BOOST_TEST_MODULE dlock_unit
#include <boost/test/unit_test.hpp>
