// SPDX-License-Identifier: BSL-1.0
#include "zookeeper/recipe.hpp"

#include <dlock/zookeeper/config.hpp>

#include <algorithm>
#include <charconv>

namespace dlock::zookeeper::recipe {

namespace {

constexpr std::string_view markers[] = {"lock-", "__READ__", "__WRIT__", "latch-"};  // by node_kind

std::string_view marker(node_kind k)
{
    return markers[static_cast<int>(k)];
}

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

path_family family_of(node_kind k) noexcept
{
    switch (k) {
    case node_kind::lock: return path_family::mutex;
    case node_kind::latch: return path_family::election;
    default: return path_family::read_write;
    }
}

std::string node_prefix(std::string_view token, std::int64_t session, node_kind kind)
{
    return "_c_" + guid_of(token, session) + "-" + std::string(marker(kind));
}

std::optional<contender> parse_contender(std::string_view child)
{
    // The marker whose rest is all digits (Curator sorts by the text after its marker).
    for (auto k : {node_kind::lock, node_kind::read, node_kind::write, node_kind::latch}) {
        auto at = child.rfind(marker(k));
        if (at == std::string_view::npos)
            continue;
        auto digits = child.substr(at + marker(k).size());
        std::int64_t n = 0;
        auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
        if (!digits.empty() && ec == std::errc() && end == digits.data() + digits.size() && n >= 0)
            return contender{k, n};
    }
    return std::nullopt;
}

std::optional<std::int64_t> sequence_of(std::string_view child)
{
    auto c = parse_contender(child);
    return c ? std::optional<std::int64_t>(c->sequence) : std::nullopt;
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
            keyed.emplace_back(*n, std::move(c));  // sequences are unique under one parent
    std::sort(keyed.begin(), keyed.end());
    std::vector<std::string> out;
    out.reserve(keyed.size());
    for (auto& [n, c] : keyed)
        out.push_back(std::move(c));
    return out;
}

path_family family_of(const std::vector<std::string>& sorted)
{
    auto f = path_family::empty;
    for (auto& c : sorted) {
        auto mine = family_of(parse_contender(c)->kind);  // contenders(): every one parses
        if (f != path_family::empty && f != mine)
            return path_family::mixed;
        f = mine;
    }
    return f;
}

position find(const std::vector<std::string>& sorted, std::string_view token, std::int64_t session)
{
    position p;
    auto prefix = "_c_" + guid_of(token, session) + "-";  // any kind: a lost create is found by its guid
    auto at = std::find_if(sorted.begin(), sorted.end(), [&](auto& c) { return c.starts_with(prefix); });
    if (at == sorted.end())
        return p;
    p.found = true;
    p.node = *at;
    p.kind = parse_contender(*at)->kind;  // contenders(): every one parses
    p.index = static_cast<std::size_t>(at - sorted.begin());
    std::size_t first_writer = p.index;
    for (std::size_t i = 0; i < p.index; ++i) {
        auto kind = parse_contender(sorted[i])->kind;
        if (!p.foreign && family_of(kind) != family_of(p.kind))
            p.foreign = true, p.foreign_kind = kind;
        if (kind == node_kind::write && first_writer == p.index)
            first_writer = i;
    }
    if (p.kind != node_kind::read) {  // a mutex, a writer or a candidate waits for the node before its own
        p.first = p.index == 0;
        if (!p.first)
            p.predecessor = sorted[p.index - 1];
    } else {  // a reader waits for the first writer before it (Curator's readLockPredicate)
        p.first = first_writer == p.index;
        if (!p.first)
            p.predecessor = sorted[first_writer];
    }
    return p;
}

bool waited_for(const std::vector<std::string>& sorted, std::string_view node)
{
    auto at = std::find(sorted.begin(), sorted.end(), node);
    if (at == sorted.end())
        return false;
    if (parse_contender(*at)->kind != node_kind::read)
        return at + 1 != sorted.end();
    return std::any_of(at + 1, sorted.end(), [](auto& c) { return parse_contender(c)->kind != node_kind::read; });
}

std::vector<std::string> holders(const std::vector<std::string>& sorted)
{
    std::vector<std::string> out;
    for (auto& c : sorted) {
        bool reader = parse_contender(c)->kind == node_kind::read;
        if (!reader && !out.empty())
            break;
        out.push_back(c);
        if (!reader)
            break;
    }
    return out;
}

}  // namespace dlock::zookeeper::recipe
