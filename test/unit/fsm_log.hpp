// SPDX-License-Identifier: BSL-1.0
// How Boost.Test prints lock_fsm values (found by ADL), and a one-line text of an action
// list for failure messages.
#pragma once

#include "core/lock_fsm.hpp"

#include <boost/test/tools/detail/print_helper.hpp>

#include <ostream>
#include <sstream>
#include <string>
#include <vector>

namespace dlock {

inline const char* fsm_text(lock_event_kind k)
{
    switch (k) {
    case lock_event_kind::acquired: return "acquired";
    case lock_event_kind::renewed: return "renewed";
    case lock_event_kind::suspect: return "suspect";
    case lock_event_kind::lost: return "lost";
    case lock_event_kind::released: return "released";
    }
    return "?";
}

inline std::ostream& boost_test_print_type(std::ostream& os, lock_event_kind k)
{
    return os << fsm_text(k);
}

}  // namespace dlock

namespace dlock::detail {

inline const char* fsm_text(fsm_action::type t)
{
    using act = fsm_action::type;
    switch (t) {
    case act::attempt: return "attempt";
    case act::watch: return "watch";
    case act::unwatch: return "unwatch";
    case act::set_timer: return "set_timer";
    case act::cancel_timer: return "cancel_timer";
    case act::renew: return "renew";
    case act::release: return "release";
    case act::complete_waiter: return "complete_waiter";
    case act::complete_release: return "complete_release";
    case act::lost: return "lost";
    case act::event: return "event";
    }
    return "?";
}

inline const char* fsm_text(fsm_state s)
{
    switch (s) {
    case fsm_state::free: return "free";
    case fsm_state::attempting: return "attempting";
    case fsm_state::waiting: return "waiting";
    case fsm_state::queued: return "queued";
    case fsm_state::held: return "held";
    case fsm_state::renewing: return "renewing";
    case fsm_state::suspect: return "suspect";
    case fsm_state::lost: return "lost";
    }
    return "?";
}

inline std::ostream& boost_test_print_type(std::ostream& os, fsm_action::type t)
{
    return os << fsm_text(t);
}
inline std::ostream& boost_test_print_type(std::ostream& os, fsm_state s)
{
    return os << fsm_text(s);
}

/// One action as text; times relative to `t0` in ms.
inline std::string fsm_text(const fsm_action& a, time_point t0)
{
    using act = fsm_action::type;
    std::ostringstream os;
    os << fsm_text(a.t);
    switch (a.t) {
    case act::attempt: os << '(' << a.token << (a.queue ? ",queue" : "") << ')'; break;
    case act::watch:
    case act::renew: os << '(' << a.token << (a.ref.empty() ? "" : "," + a.ref) << ')'; break;
    case act::release:
        os << '(' << a.token << (a.ref.empty() ? "" : "," + a.ref) << ",id=" << a.id;
        if (a.at != time_point{})
            os << ",at=" << std::chrono::duration_cast<std::chrono::milliseconds>(a.at - t0).count();
        os << ')';
        break;
    case act::set_timer:
        if (a.at == time_point::min())
            os << "(min)";
        else
            os << '(' << std::chrono::duration_cast<std::chrono::milliseconds>(a.at - t0).count() << ')';
        break;
    case act::complete_waiter:
        os << "(id=" << a.id << ",hold=" << a.hold << ",fence=" << a.fence << ",ec=" << a.ec.message() << ')';
        break;
    case act::complete_release: os << "(id=" << a.id << ",ec=" << a.ec.message() << ')'; break;
    case act::event: os << '(' << fsm_text(a.kind) << ',' << a.fence << ')'; break;
    default: break;
    }
    return os.str();
}

inline std::string fsm_text(const std::vector<fsm_action>& v, time_point t0)
{
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i)
        s += (i ? " " : "") + fsm_text(v[i], t0);
    return s + "]";
}

}  // namespace dlock::detail

// time_point: the ms count since the clock's epoch (the tests' t0 is 1000 h = 3'600'000'000 ms).
template <>
struct boost::test_tools::tt_detail::print_log_value<dlock::detail::time_point> {
    void operator()(std::ostream& os, dlock::detail::time_point t)
    {
        if (t == dlock::detail::time_point::min())
            os << "min";
        else
            os << std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count() << "ms";
    }
};
