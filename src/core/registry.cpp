#include <dlock/error.hpp>
#include <dlock/registry.hpp>

#include "common/post_completion.hpp"
#include "core/engine.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>

namespace dlock {

registry::registry(store& s, lock_config cfg) : state_(std::make_shared<detail::registry_state>(s, std::move(cfg))) {}

registry::~registry() = default;

lock registry::obtain(std::string_view name)
{
    auto& engines = state_->engines;
    std::string key(name);
    auto it = engines.find(key);
    if (it != engines.end())
        return lock(it->second->shared_from_this());
    auto e = std::make_shared<detail::engine>(state_, key);
    engines.emplace(std::move(key), e.get());
    return lock(std::move(e));
}

store& registry::get_store() const noexcept
{
    return state_->st;
}

const lock_config& registry::config() const noexcept
{
    return state_->cfg;
}
const lock_stats& registry::stats() const noexcept
{
    return state_->stats;
}
std::size_t registry::size() const noexcept
{
    return state_->engines.size();
}
std::size_t registry::in_flight() const noexcept
{
    return state_->in_flight;
}

void registry::drain_impl(boost::asio::any_completion_handler<void(boost::system::error_code)> h)
{
    auto& s = *state_;
    auto ex = s.st.get_executor();
    if (s.in_flight == 0)
        return detail::post_completion(ex, std::move(h), boost::system::error_code());
    auto slot = boost::asio::get_associated_cancellation_slot(h);
    auto d = std::make_shared<boost::asio::any_completion_handler<void(boost::system::error_code)>>(std::move(h));
    s.drains.push_back(d);
    if (slot.is_connected()) {
        std::weak_ptr<boost::asio::any_completion_handler<void(boost::system::error_code)>> wd = d;
        slot.assign([wd, ex](boost::asio::cancellation_type) {
            if (auto d = wd.lock(); d && *d)
                detail::post_completion(ex, std::move(*d),
                                        boost::system::error_code(boost::asio::error::operation_aborted));
        });
    }
}

}  // namespace dlock
