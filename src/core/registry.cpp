// SPDX-License-Identifier: BSL-1.0
#include <dlock/error.hpp>
#include <dlock/registry.hpp>

#include "common/handler_work.hpp"
#include "common/post_completion.hpp"
#include "core/lock_driver.hpp"
#include "core/semaphore_state.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>

namespace dlock {

registry::registry(store& s, lock_config cfg) : state_(std::make_shared<detail::registry_state>(s, std::move(cfg))) {}

registry::~registry() = default;

std::shared_ptr<detail::lock_driver> registry::driver_for(lease_kind kind, std::string_view name)
{
    auto& drivers = state_->drivers;
    auto it = drivers.find({kind, name});
    if (it != drivers.end())
        return it->second->shared_from_this();
    auto e = std::make_shared<detail::lock_driver>(state_, std::string(name), kind, 1, true);
    drivers.emplace(detail::driver_key{kind, e->name()}, e.get());
    return e;
}

lock registry::obtain(std::string_view name)
{
    return lock(driver_for(lease_kind::mutex, name));
}

rw_lock registry::obtain_rw(std::string_view name)
{
    return rw_lock(lock(driver_for(lease_kind::read, name)), lock(driver_for(lease_kind::write, name)));
}

semaphore registry::obtain_semaphore(std::string_view name, unsigned permits)
{
    auto& map = state_->semaphores;
    std::string key(name);
    if (auto it = map.find(key); it != map.end()) {
        if (auto s = it->second.lock()) {
            if (s->permits == permits)
                return semaphore(s);
            auto other = std::make_shared<detail::semaphore_state>(*s);
            other->lanes.clear();
            other->permits = permits;
            other->mismatch = true;
            return semaphore(other);
        }
    }
    std::erase_if(map, [](auto& e) { return e.second.expired(); });  // forget freed ones
    auto s = std::make_shared<detail::semaphore_state>();
    s->reg = state_;
    s->name = key;
    s->permits = permits;
    map[key] = s;
    return semaphore(s);
}

store& registry::get_store() const noexcept
{
    return state_->st;
}

registry::executor_type registry::get_executor() const noexcept
{
    return state_->ex;
}

const lock_config& registry::config() const noexcept
{
    return state_->cfg;
}
boost::system::error_code registry::config_error() const noexcept
{
    return state_->config_error;
}
const lock_stats& registry::stats() const noexcept
{
    return state_->stats;
}
std::size_t registry::size() const noexcept
{
    return state_->drivers.size();
}
std::size_t registry::in_flight() const noexcept
{
    return state_->in_flight;
}

void registry::drain_impl(const std::shared_ptr<detail::registry_state>& state,
                          boost::asio::any_completion_handler<void(boost::system::error_code)> h)
{
    auto& s = *state;
    auto ex = s.ex;  // not the store's: it may be gone by now (in_flight is then 0)
    if (s.in_flight == 0)
        return detail::post_completion(ex, std::move(h), boost::system::error_code());
    auto slot = boost::asio::get_associated_cancellation_slot(h);
    auto d = std::make_shared<boost::asio::any_completion_handler<void(boost::system::error_code)>>(
        detail::keep_work(std::move(h), ex));
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
