// SPDX-License-Identifier: BSL-1.0
#include "zookeeper/recipe.hpp"

#include <dlock/zookeeper/config.hpp>

#include <algorithm>
#include <charconv>

namespace dlock::zookeeper::recipe {

namespace {

constexpr std::string_view lock_name = "lock-";

std::uint64_t fnv1a(std::string_view s, std::uint64_t h)
{
    for (unsigned char c : s) {
        h ^= c;
        h *= 1099511628211ull;
    }
    return h;
}

}  // namespace

std::string guid_of(std::string_view token, std::int64_t session)
{
    // Two 64-bit hashes of the token and session in the 8-4-4-4-12 shape of Curator's UUIDs.
    char sid[8];
    for (int i = 0; i < 8; ++i)
        sid[i] = static_cast<char>(static_cast<std::uint64_t>(session) >> (8 * i));
    std::string_view s(sid, sizeof sid);
    std::uint64_t a = fnv1a(s, fnv1a(token, 14695981039346656037ull));
    std::uint64_t b = fnv1a(s, fnv1a(token, 0x9e3779b97f4a7c15ull));
    static constexpr char hex[] = "0123456789abcdef";
    std::string out;
    out.reserve(36);
    for (int i = 0; i < 32; ++i) {
        if (i == 8 || i == 12 || i == 16 || i == 20)
            out += '-';
        std::uint64_t word = i < 16 ? a : b;
        out += hex[(word >> (4 * (15 - i % 16))) & 15];
    }
    return out;
}

std::string node_prefix(std::string_view token, std::int64_t session)
{
    return "_c_" + guid_of(token, session) + "-" + std::string(lock_name);
}

std::optional<std::int64_t> sequence_of(std::string_view child)
{
    auto at = child.rfind(lock_name);
    if (at == std::string_view::npos)
        return std::nullopt;
    auto digits = child.substr(at + lock_name.size());
    std::int64_t n = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || n < 0)
        return std::nullopt;
    return n;
}

std::string lock_path(std::string_view root, std::string_view name, std::string& why)
{
    if (name.empty()) {
        why = "the lock name is empty";
        return {};
    }
    std::string path = root == "/" ? "/" + std::string(name) : std::string(root) + "/" + std::string(name);
    why = check_path(path);
    if (!why.empty()) {
        why = "the lock name '" + std::string(name) + "' does not make a ZooKeeper path: " + why;
        return {};
    }
    return path;
}

std::vector<std::string> contenders(std::vector<std::string> children)
{
    std::vector<std::pair<std::int64_t, std::string>> keyed;
    keyed.reserve(children.size());
    for (auto& c : children)
        if (auto n = sequence_of(c))
            keyed.emplace_back(*n, std::move(c));
    std::sort(keyed.begin(), keyed.end());
    std::vector<std::string> out;
    out.reserve(keyed.size());
    for (auto& [n, c] : keyed)
        out.push_back(std::move(c));
    return out;
}

position find(const std::vector<std::string>& sorted, std::string_view token, std::int64_t session)
{
    position p;
    auto prefix = node_prefix(token, session);
    for (std::size_t i = 0; i < sorted.size(); ++i) {
        if (sorted[i].compare(0, prefix.size(), prefix) != 0)
            continue;
        p.found = true;
        p.node = sorted[i];
        p.index = i;
        p.first = i == 0;
        if (i > 0)
            p.predecessor = sorted[i - 1];
        break;
    }
    return p;
}

}  // namespace dlock::zookeeper::recipe
