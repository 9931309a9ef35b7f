// SPDX-License-Identifier: BSL-1.0
#include "mariadb/wait_pool.hpp"

#include <utility>

namespace dlock::mariadb::detail {

using type = pool_action::type;

bool wait_pool::observe(const std::string& name, bool signal, milliseconds remaining, bool watched)
{
    if (closed_ || max_ == 0 || !signal || !watched)
        return false;
    auto& st = names_[name];
    ++st.seen;
    st.remaining = remaining;
    schedule(name);
    return names_[name].slot >= 0;
}

int wait_pool::free_slot()
{
    for (std::size_t i = 0; i < slots_.size(); ++i)
        if (slots_[i].empty())
            return static_cast<int>(i);
    if (slots_.size() >= max_)
        return -1;  // the pool is busy: the name's waiters sleep the holder's lease
    slots_.emplace_back();
    actions_.push_back({type::open, slots_.size() - 1});
    return static_cast<int>(slots_.size() - 1);
}

// A wait for `name` if an attempt saw its holder since the last one started and a
// connection is free. Bounded by the holder's lease: by then the waiters retry anyway.
void wait_pool::schedule(const std::string& name)
{
    auto it = names_.find(name);
    if (it == names_.end() || it->second.slot >= 0 || it->second.seen == it->second.waited)
        return;
    int k = free_slot();
    if (k < 0)
        return;
    auto& st = it->second;
    st.slot = k;
    st.waited = st.seen;
    slots_[k] = name;
    actions_.push_back({type::wait, static_cast<std::size_t>(k), name, st.remaining + milliseconds(1000)});
}

void wait_pool::on_done(std::size_t slot, wait_end end, bool watched)
{
    if (closed_ || slot >= slots_.size() || slots_[slot].empty())
        return;
    auto name = std::exchange(slots_[slot], std::string());
    auto it = names_.find(name);
    if (it != names_.end())
        it->second.slot = -1;
    if (!watched)
        names_.erase(name);
    else if (end == wait_end::failed)
        actions_.push_back({type::resync, slot, name});
    else if (end == wait_end::released)
        actions_.push_back({type::released, slot, name});
    else
        schedule(name);           // timed out: again if a newer attempt saw the holder
    for (auto& [n, st] : names_)  // a name that found the pool busy takes the free connection
        if (st.slot < 0 && st.seen != st.waited) {
            schedule(n);
            break;
        }
}

void wait_pool::on_unwatched(const std::string& name)
{
    auto it = names_.find(name);
    if (it == names_.end())
        return;
    if (it->second.slot >= 0)  // free the connection now; its end forgets the name
        actions_.push_back({type::abort, static_cast<std::size_t>(it->second.slot), name});
    else
        names_.erase(it);
}

void wait_pool::close()
{
    closed_ = true;
    names_.clear();
}

const char* wait_pool::state(const std::string& name) const
{
    auto it = names_.find(name);
    if (it == names_.end())
        return "none";
    auto& st = it->second;
    if (st.slot >= 0)
        return st.seen == st.waited ? "waiting" : "waiting+seen";
    return st.seen == st.waited ? "known" : "pending";
}

}  // namespace dlock::mariadb::detail
