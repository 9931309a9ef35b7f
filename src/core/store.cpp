// SPDX-License-Identifier: BSL-1.0
#include <dlock/error.hpp>
#include <dlock/store.hpp>

#include "common/post_completion.hpp"

namespace dlock {

void store::do_connect(boost::asio::any_completion_handler<connect_signature> h)
{
    detail::post_completion(get_executor(), std::move(h), boost::system::error_code());
}

}  // namespace dlock

// ---- count-down latch: stores that do not override these cannot keep a latch ----
namespace dlock {

void store::do_count_down(const std::string&, const std::string&, std::uint64_t, std::chrono::milliseconds,
                          boost::asio::any_completion_handler<count_down_signature> h)
{
    detail::post_completion(get_executor(), std::move(h), make_error_code(error::not_supported), std::uint64_t{0});
}

void store::do_latch_state(const std::string&, boost::asio::any_completion_handler<latch_state_signature> h)
{
    detail::post_completion(get_executor(), std::move(h), make_error_code(error::not_supported), latch_state{});
}

}  // namespace dlock

// ---- elections: stores that do not override these keep no leader's value ----
namespace dlock {

void store::do_proclaim(const lease_key&, const std::string&, boost::asio::any_completion_handler<proclaim_signature> h)
{
    detail::post_completion(get_executor(), std::move(h), make_error_code(error::not_supported), false);
}

void store::do_leader(const std::string&, boost::asio::any_completion_handler<leader_signature> h)
{
    detail::post_completion(get_executor(), std::move(h), make_error_code(error::not_supported), lock_status{});
}

}  // namespace dlock
