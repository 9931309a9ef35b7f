// SPDX-License-Identifier: BSL-1.0
// How Boost.Test prints dlock values when an assertion fails (found by ADL).
#pragma once

#include <dlock/error.hpp>
#include <dlock/redis/reply.hpp>

#include <ostream>

namespace dlock {

inline std::ostream& boost_test_print_type(std::ostream& os, error e)
{
    return os << make_error_code(e).what();
}

}  // namespace dlock

namespace dlock::redis {

inline std::ostream& boost_test_print_type(std::ostream& os, reply_type t)
{
    switch (t) {
    case reply_type::string: return os << "string";
    case reply_type::status: return os << "status";
    case reply_type::error: return os << "error";
    case reply_type::integer: return os << "integer";
    case reply_type::nil: return os << "nil";
    case reply_type::array: return os << "array";
    }
    return os << "reply_type(" << static_cast<int>(t) << ')';
}

inline std::ostream& boost_test_print_type(std::ostream& os, const reply& r)
{
    switch (r.type) {
    case reply_type::string: return os << '"' << r.str << '"';
    case reply_type::status: return os << '+' << r.str;
    case reply_type::error: return os << '-' << r.str;
    case reply_type::integer: return os << ':' << r.integer;
    case reply_type::nil: return os << "nil";
    case reply_type::array:
        os << '[';
        for (std::size_t i = 0; i < r.elements.size(); ++i) {
            if (i)
                os << ", ";
            boost_test_print_type(os, r.elements[i]);
        }
        return os << ']';
    }
    return os;
}

}  // namespace dlock::redis
