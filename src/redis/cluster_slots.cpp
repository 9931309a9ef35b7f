// SPDX-License-Identifier: BSL-1.0
#include "redis/cluster_slots.hpp"

#include <dlock/error.hpp>

#include <boost/asio/error.hpp>

#include <charconv>

namespace dlock::redis::detail {

namespace {

bool to_uint(std::string_view s, unsigned long& out)
{
    if (s.empty())
        return false;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size();
}

// An integer reply, or a bulk string holding one (CLUSTER SHARDS sent strings in early 7.0).
bool as_uint(const reply& r, unsigned long& out)
{
    if (r.type == reply_type::integer) {
        if (r.integer < 0)
            return false;
        out = static_cast<unsigned long>(r.integer);
        return true;
    }
    return r.type == reply_type::string && to_uint(r.str, out);
}

std::string usable_host(const std::string& host, std::string_view asked_host)
{
    return host.empty() || host == "?" ? std::string(asked_host) : host;
}

// A flat RESP2 map [k1, v1, k2, v2, ...]: the value of `key`, or nullptr.
const reply* field(const reply& m, std::string_view key)
{
    if (m.type != reply_type::array)
        return nullptr;
    for (std::size_t i = 0; i + 1 < m.elements.size(); i += 2)
        if (m.elements[i].str == key)
            return &m.elements[i + 1];
    return nullptr;
}

}  // namespace

std::string node_address::to_string() const
{
    return host + ":" + std::to_string(port);
}

std::optional<node_address> parse_address(std::string_view text, std::string_view fallback_host)
{
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos)
        return std::nullopt;
    // "host:port@bus-port" (CLUSTER NODES style) is accepted too.
    auto port_text = text.substr(colon + 1);
    port_text = port_text.substr(0, port_text.find('@'));
    unsigned long port = 0;
    if (!to_uint(port_text, port) || port == 0 || port > 65535)
        return std::nullopt;
    node_address a;
    a.host = usable_host(std::string(text.substr(0, colon)), fallback_host);
    a.port = static_cast<std::uint16_t>(port);
    if (a.host.empty())
        return std::nullopt;
    return a;
}

// ---- slot_map ----

slot_map::slot_map()
{
    owner_.fill(none);
}

const node_address* slot_map::master_of(unsigned slot) const noexcept
{
    if (slot >= cluster_slot_count || owner_[slot] == none)
        return nullptr;
    return &nodes_[owner_[slot]];
}

std::uint16_t slot_map::index_of(const node_address& addr)
{
    for (std::size_t i = 0; i < nodes_.size(); ++i)
        if (nodes_[i] == addr)
            return static_cast<std::uint16_t>(i);
    nodes_.push_back(addr);
    return static_cast<std::uint16_t>(nodes_.size() - 1);
}

bool slot_map::assign(unsigned slot, const node_address& addr)
{
    if (slot >= cluster_slot_count)
        return false;
    auto idx = index_of(addr);
    if (owner_[slot] == idx)
        return false;
    if (owner_[slot] == none)
        ++covered_;
    owner_[slot] = idx;
    return true;
}

void slot_map::assign_range(unsigned first, unsigned last, const node_address& addr)
{
    if (last >= cluster_slot_count)
        last = cluster_slot_count - 1;
    auto idx = index_of(addr);
    for (unsigned s = first; s <= last; ++s) {
        if (owner_[s] == none)
            ++covered_;
        owner_[s] = idx;
    }
}

std::vector<node_address> slot_map::masters() const
{
    std::vector<bool> used(nodes_.size(), false);
    for (auto o : owner_)
        if (o != none)
            used[o] = true;
    std::vector<node_address> out;
    for (std::size_t i = 0; i < nodes_.size(); ++i)
        if (used[i])
            out.push_back(nodes_[i]);
    return out;
}

unsigned slot_map::covered() const noexcept
{
    return covered_;
}

// ---- topology replies ----

bool parse_cluster_slots(const reply& r, std::string_view asked_host, slot_map& out, std::string& err)
{
    if (r.type != reply_type::array) {
        err = "CLUSTER SLOTS: not an array";
        return false;
    }
    slot_map m;
    for (const auto& range : r.elements) {
        unsigned long first = 0, last = 0, port = 0;
        if (range.type != reply_type::array || range.elements.size() < 3 || !as_uint(range.elements[0], first) ||
            !as_uint(range.elements[1], last) || first > last || last >= cluster_slot_count) {
            err = "CLUSTER SLOTS: bad slot range";
            return false;
        }
        const reply& master = range.elements[2];
        if (master.type != reply_type::array || master.elements.size() < 2 ||
            master.elements[0].type != reply_type::string || !as_uint(master.elements[1], port) || port == 0 ||
            port > 65535) {
            err = "CLUSTER SLOTS: bad master entry";
            return false;
        }
        node_address a{usable_host(master.elements[0].str, asked_host), static_cast<std::uint16_t>(port)};
        if (a.host.empty()) {
            err = "CLUSTER SLOTS: master without an address";
            return false;
        }
        m.assign_range(static_cast<unsigned>(first), static_cast<unsigned>(last), a);
    }
    out = std::move(m);
    return true;
}

bool parse_cluster_shards(const reply& r, std::string_view asked_host, slot_map& out, std::string& err)
{
    if (r.type != reply_type::array) {
        err = "CLUSTER SHARDS: not an array";
        return false;
    }
    slot_map m;
    for (const auto& shard : r.elements) {
        const reply* slots = field(shard, "slots");
        const reply* nodes = field(shard, "nodes");
        if (!slots || !nodes || slots->type != reply_type::array || slots->elements.size() % 2 != 0 ||
            nodes->type != reply_type::array) {
            err = "CLUSTER SHARDS: bad shard entry";
            return false;
        }
        if (slots->elements.empty())
            continue;  // a shard serving nothing (an empty master)
        std::optional<node_address> master;
        for (const auto& n : nodes->elements) {
            const reply* role = field(n, "role");
            const reply* health = field(n, "health");
            if (!role || role->str != "master" || (health && health->str == "fail"))
                continue;
            const reply* host = field(n, "ip");
            const reply* endpoint = field(n, "endpoint");
            if (endpoint && !endpoint->str.empty() && endpoint->str != "?")
                host = endpoint;
            const reply* port = field(n, "port");
            if (!port)
                port = field(n, "tls-port");
            unsigned long p = 0;
            if (!host || !port || !as_uint(*port, p) || p == 0 || p > 65535)
                continue;
            master = node_address{usable_host(host->str, asked_host), static_cast<std::uint16_t>(p)};
            break;
        }
        if (!master || master->host.empty()) {
            err = "CLUSTER SHARDS: a shard with slots has no usable master";
            return false;
        }
        for (std::size_t i = 0; i < slots->elements.size(); i += 2) {
            unsigned long first = 0, last = 0;
            if (!as_uint(slots->elements[i], first) || !as_uint(slots->elements[i + 1], last) || first > last ||
                last >= cluster_slot_count) {
                err = "CLUSTER SHARDS: bad slot range";
                return false;
            }
            m.assign_range(static_cast<unsigned>(first), static_cast<unsigned>(last), *master);
        }
    }
    out = std::move(m);
    return true;
}

// ---- redirections ----

redirect parse_redirect(std::string_view text, std::string_view from_host)
{
    redirect out;
    auto word_end = text.find(' ');
    auto word = text.substr(0, word_end);
    if (word == "TRYAGAIN") {
        out.kind = redirect_kind::tryagain;
        return out;
    }
    if (word == "CLUSTERDOWN") {
        out.kind = redirect_kind::down;
        return out;
    }
    if ((word != "MOVED" && word != "ASK") || word_end == std::string_view::npos)
        return out;
    auto rest = text.substr(word_end + 1);
    auto space = rest.find(' ');
    if (space == std::string_view::npos)
        return out;
    unsigned long slot = 0;
    if (!to_uint(rest.substr(0, space), slot) || slot >= cluster_slot_count)
        return out;
    auto target = parse_address(rest.substr(space + 1), from_host);
    if (!target)
        return out;
    out.kind = word == "MOVED" ? redirect_kind::moved : redirect_kind::ask;
    out.slot = static_cast<unsigned>(slot);
    out.target = std::move(*target);
    return out;
}

step next_step(boost::system::error_code ec, const reply& r, const node_address& from, int attempts, int max_attempts)
{
    step s;
    if (!ec)
        return s;
    if (ec == boost::asio::error::operation_aborted || ec == error::closed)
        return s;  // the caller cancelled, or the store is closing: nothing to learn
    if (ec != error::server_error) {
        // Lost connection, timeout, refused connect: the master may have failed over.
        s.refresh = true;
        return s;
    }
    auto rd = r.is_error() ? parse_redirect(r.str, from.host) : redirect{};
    if (rd.kind == redirect_kind::none)
        return s;  // an ordinary error reply (a script error...): the caller's to see
    s.refresh = rd.kind == redirect_kind::moved || rd.kind == redirect_kind::down;
    // TRYAGAIN and CLUSTERDOWN are bounded by the caller's clock, not counted: the attempt
    // that followed an ASK to a target answering TRYAGAIN must not use up the redirections.
    bool counted = rd.kind == redirect_kind::moved || rd.kind == redirect_kind::ask;
    if (counted && attempts >= max_attempts) {
        s.kind = step_kind::fail;
        s.ec = error::server_error;  // the last redirection's text stays in the reply
        return s;
    }
    switch (rd.kind) {
    case redirect_kind::moved: s.kind = step_kind::retry_moved; break;
    case redirect_kind::ask: s.kind = step_kind::retry_ask; break;
    default: s.kind = step_kind::retry_later; break;
    }
    s.target = std::move(rd.target);
    return s;
}

}  // namespace dlock::redis::detail
