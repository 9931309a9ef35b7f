#include <dlock/store.hpp>

#include "common/post_completion.hpp"

namespace dlock {

// Also the store's key function: its vtable is emitted here.
void store::do_connect(boost::asio::any_completion_handler<connect_signature> h)
{
    detail::post_completion(get_executor(), std::move(h), boost::system::error_code());
}

}  // namespace dlock
