// SPDX-License-Identifier: BSL-1.0
#include "redis/sentinel_query.hpp"

#include <dlock/error.hpp>
#include <dlock/redis/request.hpp>

#include <algorithm>
#include <charconv>

namespace dlock::redis::detail {

using boost::system::error_code;

sentinel_query::sentinel_query(const sentinel_config& sc) : master_(sc.master_name)
{
    redis::request req;
    if (!sc.password.empty()) {
        if (sc.username.empty())
            req.push("AUTH", sc.password);
        else
            req.push("AUTH", sc.username, sc.password);
        auth_pending_ = true;
    }
    req.push("SENTINEL", "get-master-addr-by-name", sc.master_name);
    request_ = req.take_payload();
}

sentinel_query::state sentinel_query::decide(state s, error_code ec, std::string said)
{
    state_ = s;
    ec_ = ec;
    said_ = std::move(said);
    return state_;
}

namespace {
bool whole_port(const reply& r)
{
    std::uint16_t p = 0;
    const char* end = r.str.data() + r.str.size();
    auto [at, ec] = std::from_chars(r.str.data(), end, p);
    return r.type == reply_type::string && ec == std::errc() && at == end && p != 0;
}
}  // namespace

sentinel_query::state sentinel_query::feed(const reply& r)
{
    if (done())
        return state_;
    const bool to_auth = auth_pending_;
    auth_pending_ = false;
    if (r.is_error())
        return to_auth ? decide(state::auth_refused, error::auth_failed, r.str)
                       : decide(state::refused, error::resolve_failed, r.str);
    if (to_auth)
        return state_;  // +OK: the answer to the question comes next
    if (r.is_nil())
        return decide(state::unknown_master, error::resolve_failed, "does not know master '" + master_ + "'");
    // Two bulk strings: a host that is not empty and a whole port number, 1 to 65535.
    if (r.type != reply_type::array || r.elements.size() != 2 || r.elements[0].type != reply_type::string ||
        r.elements[0].str.empty() || !whole_port(r.elements[1]))
        return decide(state::malformed, error::protocol_error, "gave an unexpected reply");
    const std::string& digits = r.elements[1].str;
    std::uint16_t p = 0;
    std::from_chars(digits.data(), digits.data() + digits.size(), p);
    host_ = r.elements[0].str;
    port_ = p;
    return decide(state::found, {}, {});
}

void sentinel_query::closed()
{
    if (!done())
        decide(state::closed, error::connect_failed, "closed the connection");
}

void sentinel_query::fail(error_code ec)
{
    if (state_ != state::found)
        decide(state::failed, ec, {});
}

sentinel_walk::sentinel_walk(const sentinel_config& sc) : nodes_(sc.nodes)
{
    if (nodes_.empty()) {
        done_ = true;
        result_ = error::resolve_failed;
        message_ = "no sentinels configured for master '" + sc.master_name + "'";
    }
}

void sentinel_walk::record(const sentinel_query& q)
{
    if (done_)
        return;
    if (q.current() == sentinel_query::state::found) {
        host_ = q.host();
        port_ = q.port();
        // The one that answered goes first next time; the others keep their order.
        std::rotate(nodes_.begin(), nodes_.begin() + static_cast<std::ptrdiff_t>(at_),
                    nodes_.begin() + static_cast<std::ptrdiff_t>(at_) + 1);
        done_ = true;
        return;
    }
    const error_code ec = q.done() ? q.error() : error_code(error::protocol_error);
    const sentinel_node& n = nodes_[at_];
    message_ += (message_.empty() ? "" : "; ") + ("sentinel " + n.host + ":" + std::to_string(n.port) + ": " +
                                                   (q.said().empty() ? ec.message() : q.said()));
    last_ = ec;
    if (++at_ == nodes_.size()) {
        done_ = true;
        result_ = last_ == error::auth_failed ? last_ : error_code(error::resolve_failed);
    }
}

}  // namespace dlock::redis::detail
