// SPDX-License-Identifier: BSL-1.0
#include "common/channel_table.hpp"

#include <algorithm>

namespace dlock::detail {

bool channel_table::add(const std::string& channel, watcher_id w)
{
    auto [it, inserted] = channels_.try_emplace(channel);
    it->second.watchers.push_back(w);
    if (inserted)
        it->second.pending = 1;
    return inserted;
}

bool channel_table::remove(const std::string& channel, watcher_id w)
{
    auto it = channels_.find(channel);
    if (it == channels_.end())
        return false;
    std::erase(it->second.watchers, w);
    if (!it->second.watchers.empty())
        return false;
    channels_.erase(it);
    return true;
}

channel_table::confirmation channel_table::on_confirm(const std::string& channel)
{
    auto it = channels_.find(channel);
    if (it == channels_.end())
        return {};
    auto& e = it->second;
    if (e.pending > 0)
        --e.pending;
    // Only the last of several SUBSCRIBEs in flight counts, and a confirmed channel is told once.
    if (e.pending != 0 || e.confirmed)
        return {};
    e.confirmed = true;
    bool again = e.was_confirmed;
    e.was_confirmed = true;
    return {again ? confirm_kind::resync : confirm_kind::ready, e.watchers};
}

void channel_table::on_resubscribe(const std::string& channel)
{
    unconfirm(channel, 1);
}

void channel_table::on_lost(const std::string& channel)
{
    unconfirm(channel, 0);
}

// The subscription is gone; `pending` says whether a new one is on its way.
void channel_table::unconfirm(const std::string& channel, int pending)
{
    auto it = channels_.find(channel);
    if (it == channels_.end())
        return;
    auto& e = it->second;
    e.was_confirmed = e.was_confirmed || e.confirmed;
    e.confirmed = false;
    e.pending = pending;
}

std::vector<std::string> channel_table::on_disconnect()
{
    auto names = channels();
    for (const auto& n : names)
        on_lost(n);
    return names;
}

std::vector<std::string> channel_table::resubscribe_all()
{
    auto names = channels();
    for (const auto& n : names)
        on_resubscribe(n);
    return names;
}

bool channel_table::is_confirmed(const std::string& channel) const
{
    auto it = channels_.find(channel);
    return it != channels_.end() && it->second.confirmed;
}

int channel_table::pending(const std::string& channel) const
{
    auto it = channels_.find(channel);
    return it == channels_.end() ? 0 : it->second.pending;
}

std::vector<channel_table::watcher_id> channel_table::watchers(const std::string& channel) const
{
    auto view = watchers_view(channel);
    return {view.begin(), view.end()};
}

std::vector<std::string> channel_table::channels() const
{
    std::vector<std::string> out;
    out.reserve(channels_.size());
    for (const auto& [name, e] : channels_)
        out.push_back(name);
    return out;
}

std::span<const channel_table::watcher_id> channel_table::watchers_view(const std::string& channel) const
{
    auto it = channels_.find(channel);
    if (it == channels_.end())
        return {};
    return it->second.watchers;
}

}  // namespace dlock::detail
