#define BOOST_TEST_MODULE dlock_examples
#include <boost/test/unit_test.hpp>
