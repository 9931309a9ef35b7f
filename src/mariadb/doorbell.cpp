// SPDX-License-Identifier: BSL-1.0
#include "mariadb/doorbell.hpp"

#include <algorithm>
#include <utility>

namespace dlock::mariadb::detail {

using type = bell_action::type;

void doorbell::watch(const std::string& name)
{
    if (closed_ || names_.count(name))
        return;
    auto& st = names_[name];
    if (unavailable_) {
        st.failed = st.told_ready = true;
        actions_.push_back({type::ready, {name}});  // no bells: its waiters sleep their bound
        return;
    }
    if (conn_ != 0)
        enrol({name});
    sleep_again(milliseconds(0));  // learns the sleeper's id first, if needed
}

void doorbell::on_unavailable()
{
    if (closed_ || unavailable_)
        return;
    unavailable_ = true;
    std::vector<std::string> ready;
    for (auto& [n, st] : names_) {
        st.enrolled = false;
        st.failed = true;
        if (!std::exchange(st.told_ready, true))
            ready.push_back(n);
    }
    if (!ready.empty())
        actions_.push_back({type::ready, std::move(ready)});
}

void doorbell::unwatch(const std::string& name)
{
    auto it = names_.find(name);
    if (it == names_.end())
        return;
    if (it->second.enrolled)
        actions_.push_back({type::leave, {name}, conn_});
    names_.erase(it);
}

void doorbell::enrol(std::vector<std::string> names)
{
    for (const auto& n : names)
        names_[n].failed = false;
    actions_.push_back({type::enrol, std::move(names), conn_});
}

bool doorbell::wanted() const
{
    return !unavailable_ && !names_.empty();
}

void doorbell::sleep_again(milliseconds delay)
{
    if (closed_ || sleeping_ || !wanted())
        return;
    sleeping_ = true;
    actions_.push_back({type::sleep, {}, conn_, baseline_, delay});
}

void doorbell::on_sleep_done(const bell_reading& r, bool failed)
{
    sleeping_ = false;
    if (closed_)
        return;
    if (r.conn != 0 && (r.conn != conn_ || r.session != session_)) {
        // A new sleeper connection: the old one's rows go, every name is enrolled again.
        if (conn_ != 0)
            actions_.push_back({type::leave, {}, conn_});
        conn_ = r.conn;
        session_ = r.session;
        baseline_ = {~std::uint64_t{0}, 0};
        std::vector<std::string> all;
        for (auto& [n, st] : names_) {
            st.enrolled = false;
            all.push_back(n);
        }
        if (!all.empty())
            enrol(std::move(all));
    } else if (r.conn != 0) {
        std::uint64_t sum = 0;
        std::vector<std::string> rung;
        for (const auto& row : r.rows) {
            sum += row.rings;
            auto it = names_.find(row.name);
            if (it != names_.end() && it->second.enrolled && it->second.rings != row.rings) {
                it->second.rings = row.rings;
                rung.push_back(row.name);
            }
        }
        baseline_ = {r.rows.size(), sum};
        if (!rung.empty())
            actions_.push_back({type::released, std::move(rung)});
        // Enrolments that failed (a reconnect, a full table) are tried again, once a sleep.
        std::vector<std::string> again;
        for (const auto& [n, st] : names_)
            if (st.failed)
                again.push_back(n);
        if (!again.empty())
            enrol(std::move(again));
    }
    backoff_ = !failed ? milliseconds(0) : std::clamp(backoff_ * 2, milliseconds(100), milliseconds(2000));
    sleep_again(backoff_);
}

void doorbell::on_enrolled(const std::vector<std::string>& names, std::uint64_t conn, bool ok)
{
    if (closed_ || conn != conn_)
        return;  // an older connection's: the newer one's enrolment follows
    std::vector<std::string> ready, resync, gone;
    for (const auto& n : names) {
        auto it = names_.find(n);
        if (it == names_.end()) {
            if (ok)
                gone.push_back(n);  // unwatched while its row went in: it goes again
            continue;
        }
        auto& st = it->second;
        st.enrolled = ok;
        st.failed = !ok;
        st.rings = 0;
        (st.told_ready ? resync : ready).push_back(n);
        st.told_ready = true;
    }
    if (!ready.empty())
        actions_.push_back({type::ready, std::move(ready)});
    if (!resync.empty())
        actions_.push_back({type::resync, std::move(resync)});
    if (!gone.empty())
        actions_.push_back({type::leave, std::move(gone), conn});
    sleep_again(milliseconds(0));
}

void doorbell::close()
{
    closed_ = true;
    names_.clear();
}

bool doorbell::enrolled(const std::string& name) const
{
    auto it = names_.find(name);
    return it != names_.end() && it->second.enrolled;
}

}  // namespace dlock::mariadb::detail
