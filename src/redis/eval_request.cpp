// SPDX-License-Identifier: BSL-1.0
#include "redis/eval_request.hpp"

#include <dlock/error.hpp>

#include <algorithm>

namespace dlock::redis::detail {

eval_request::eval_request(const script& s, std::span<const std::string> keys, std::span<const std::string> args,
                           bool asking)
    : body_(s.shared_body()), nargs_(3 + keys.size() + args.size()), asking_(asking)
{
    const auto& sha = s.sha1();
    std::copy_n(sha.data(), std::min(sha.size(), sha1_.size()), sha1_.begin());
    std::size_t bytes = 16;
    for (const auto& k : keys)
        bytes += k.size() + 16;
    for (const auto& a : args)
        bytes += a.size() + 16;
    tail_.reserve(bytes);
    request::encode_arg(tail_, std::to_string(keys.size()));
    for (const auto& k : keys)
        request::encode_arg(tail_, k);
    for (const auto& a : args)
        request::encode_arg(tail_, a);
}

request eval_request::first(bool load)
{
    return build(load);
}

request eval_request::build(bool by_body)
{
    request req;
    if (asking_)
        req.push("ASKING");
    if (by_body)
        req.push_encoded("EVAL", *body_, nargs_, tail_);
    else
        req.push_encoded("EVALSHA", std::string_view(sha1_.data(), sha1_.size()), nargs_, tail_);
    return req;
}

std::pair<boost::system::error_code, reply> eval_request::take_reply(boost::system::error_code ec, response& r) const
{
    std::size_t at = asking_ ? 1 : 0;
    if (r.size() != at + 1)
        return {ec, reply()};
    reply out = std::move(r[at]);
    // The connection calls the whole response a server error if any reply is one.
    if (ec == error::server_error && !out.is_error() &&
        std::none_of(r.begin(), r.begin() + at, [](const reply& x) { return x.is_error(); }))
        ec = {};
    return {ec, std::move(out)};
}

bool is_noscript(const boost::system::error_code& ec, const reply& r) noexcept
{
    return ec == error::server_error && r.is_error() && r.str.rfind("NOSCRIPT", 0) == 0;
}

}  // namespace dlock::redis::detail
