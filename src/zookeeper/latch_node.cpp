// SPDX-License-Identifier: BSL-1.0
#include "zookeeper/latch_node.hpp"

#include <algorithm>
#include <charconv>

namespace dlock::zookeeper::latch_node {

namespace {

constexpr std::string_view magic = "dlock-latch/";

// A decimal number ending at `stop` from `at`, which moves past the stop.
template <class T>
bool number(std::string_view s, std::size_t& at, char stop, T& out)
{
    auto end = s.find(stop, at);
    if (end == std::string_view::npos || end == at)
        return false;
    auto [p, ec] = std::from_chars(s.data() + at, s.data() + end, out);
    if (ec != std::errc() || p != s.data() + end)
        return false;
    at = end + 1;
    return true;
}

}  // namespace

std::string encode(const content& c)
{
    std::string out(magic);
    out += std::to_string(c.count) + "/" + std::to_string(c.ttl_ms) + "\n";
    for (const auto& m : c.members)
        out += std::to_string(m.size()) + ":" + m + "\n";
    return out;
}

std::optional<content> decode(std::string_view data)
{
    if (data.substr(0, magic.size()) != magic)
        return std::nullopt;
    content c;
    std::size_t at = magic.size();
    if (!number(data, at, '/', c.count) || !number(data, at, '\n', c.ttl_ms) || c.count == 0 || c.ttl_ms <= 0)
        return std::nullopt;
    while (at < data.size()) {
        std::size_t len = 0;
        if (!number(data, at, ':', len) || len == 0 || data.size() - at < len + 1 || data[at + len] != '\n')
            return std::nullopt;
        c.members.emplace_back(data.substr(at, len));
        at += len + 1;
    }
    return c;
}

step count_down(const std::optional<content>& current, std::string_view member, std::uint64_t count,
                std::int64_t ttl_ms)
{
    step s;
    if (current && current->count != count) {
        s.mismatch = true;
        s.have = current->count;
        return s;
    }
    s.next = current ? *current : content{count, ttl_ms, {}};
    auto& ms = s.next.members;
    if (ms.size() < count && std::find(ms.begin(), ms.end(), member) == ms.end())
        ms.emplace_back(member);
    s.remaining = remaining(s.next);
    s.too_big = encode(s.next).size() > max_data;
    return s;
}

}  // namespace dlock::zookeeper::latch_node
