// SPDX-License-Identifier: BSL-1.0
#include "redis_model.hpp"

namespace dlock::sim {

acquire_result redis_model::acquire(const std::string& token, milliseconds ttl, real_time now)
{
    acquire_result r;
    if (live(now) && row_->owner != token) {
        r.holder_ttl =
            row_->expires ? std::chrono::duration_cast<milliseconds>(*row_->expires - now) : milliseconds(-1);
        return r;
    }
    if (!live(now))
        row_ = lock_row{token, ++counter_, std::nullopt};
    if (!faults_.setnx_then_expire || row_->expires)
        row_->expires = now + ttl;
    r.acquired = true;
    r.fencing_token = row_->fence;
    r.granted_ttl = ttl;
    return r;
}

void redis_model::expire(const std::string& token, milliseconds ttl, real_time now)
{
    if (row_ && row_->owner == token && !row_->expires)
        row_->expires = now + ttl;
}

renew_result redis_model::renew(const std::string& token, milliseconds ttl, real_time now)
{
    if (!live(now) || row_->owner != token)
        return {};
    row_->expires = now + ttl;
    return {true, false};
}

bool redis_model::release(const std::string& token, real_time now)
{
    if (!live(now) || (row_->owner != token && !faults_.release_without_owner_check))
        return false;
    row_.reset();
    if (on_publish)
        on_publish();
    return true;
}

void redis_model::restart()
{
    if (faults_.counter_not_durable)
        counter_ = 0;
    subscribers_.clear();  // every connection is gone with the server
}

std::optional<std::string> redis_model::holder(real_time now) const
{
    if (!live(now))
        return std::nullopt;
    return row_->owner;
}

}  // namespace dlock::sim
