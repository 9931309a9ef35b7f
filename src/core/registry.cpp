#include <dlock/error.hpp>
#include <dlock/registry.hpp>

#include "core/engine.hpp"

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

const lock_config& registry::config() const noexcept { return state_->cfg; }
const lock_stats& registry::stats() const noexcept { return state_->stats; }
std::size_t registry::size() const noexcept { return state_->engines.size(); }

}  // namespace dlock
