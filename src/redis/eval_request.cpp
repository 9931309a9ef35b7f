#include "redis/eval_request.hpp"

#include <dlock/error.hpp>

#include <algorithm>

namespace dlock::redis::detail {

eval_request::eval_request(const script& s, std::span<const std::string> keys, std::span<const std::string> args,
                           bool asking)
    : body_(s.shared_body()), sha1_(s.sha1()), asking_(asking)
{
    tail_.reserve(2 + keys.size() + args.size());
    tail_.push_back(sha1_);
    tail_.push_back(std::to_string(keys.size()));
    tail_.insert(tail_.end(), keys.begin(), keys.end());
    tail_.insert(tail_.end(), args.begin(), args.end());
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
    if (!by_body) {
        req.push_range("EVALSHA", tail_);
        return req;
    }
    // The body only for the moment of encoding: the tail stays small while it waits.
    tail_[0] = *body_;
    req.push_range("EVAL", tail_);
    tail_[0] = sha1_;
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
