// SPDX-License-Identifier: BSL-1.0
#include "zookeeper/semaphore_layout.hpp"

#include "zookeeper/recipe.hpp"

#include <algorithm>
#include <charconv>

namespace dlock::zookeeper::semaphore_layout {

namespace {

constexpr std::string_view of_marker = "-lease-of";

}  // namespace

std::string lease_prefix(std::string_view token, std::int64_t session, unsigned permits)
{
    return "_c_" + recipe::guid_of(token, session) + std::string(of_marker) + std::to_string(permits) + "-";
}

std::optional<unsigned> permits_of(std::string_view child)
{
    auto at = child.rfind(of_marker);
    if (at == std::string_view::npos)
        return std::nullopt;
    auto rest = child.substr(at + of_marker.size());
    unsigned n = 0;
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), n);
    if (ec != std::errc() || end == rest.data() || end == rest.data() + rest.size() || *end != '-')
        return std::nullopt;
    return n;
}

bool has_semaphore(const std::vector<std::string>& children)
{
    return std::any_of(children.begin(), children.end(),
                       [](const std::string& c) { return c == locks || c == leases; });
}

lease_count count_leases(const std::vector<std::string>& children, std::string_view token, std::int64_t session,
                         unsigned permits)
{
    lease_count out;
    out.count = children.size();
    auto mine = "_c_" + recipe::guid_of(token, session) + "-";
    for (auto& c : children) {
        if (!out.found && c.rfind(mine, 0) == 0) {
            out.found = true;
            out.node = c;
        }
        if (auto n = permits_of(c); n && *n != permits && !out.other_permits)
            out.other_permits = *n;
    }
    return out;
}

}  // namespace dlock::zookeeper::semaphore_layout
