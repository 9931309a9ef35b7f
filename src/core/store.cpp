// SPDX-License-Identifier: BSL-1.0
#include <dlock/error.hpp>
#include <dlock/store.hpp>

#include "common/post_completion.hpp"

namespace dlock {

void store::do_connect(boost::asio::any_completion_handler<connect_signature> h)
{
    detail::post_completion(get_executor(), std::move(h), boost::system::error_code());
}

unsigned store::capabilities() const noexcept
{
    auto c = capabilities_of(traits());
    auto& self = const_cast<store&>(*this);  // only asks whether they exist
    if (self.latches())
        c |= static_cast<unsigned>(capability::latch);
    if (self.elections())
        c |= static_cast<unsigned>(capability::election);
    return c;
}

std::weak_ptr<void> detail::lifetime_of(const store& s) noexcept
{
    return s.lifetime_;
}

}  // namespace dlock
