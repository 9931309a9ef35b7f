// SPDX-License-Identifier: BSL-1.0
#include "redis/handshake.hpp"

#include <dlock/error.hpp>
#include <dlock/redis/request.hpp>

namespace dlock::redis::detail {

using boost::system::error_code;

handshake::handshake(const config& cfg)
{
    redis::request req;
    if (!cfg.password.empty()) {
        if (cfg.username.empty())
            req.push("AUTH", cfg.password);
        else
            req.push("AUTH", cfg.username, cfg.password);
        steps_.push_back(step::auth);
    }
    if (cfg.database != 0) {
        req.push("SELECT", cfg.database);
        steps_.push_back(step::select);
    }
    if (!cfg.client_name.empty()) {
        req.push("CLIENT", "SETNAME", cfg.client_name);
        steps_.push_back(step::setname);
    }
    // Through Sentinel: make sure its answer was not stale (a demoted master).
    if (!cfg.sentinel.master_name.empty()) {
        req.push("ROLE");
        steps_.push_back(step::role);
        where_ = cfg.host + ":" + std::to_string(cfg.port) + " as master '" + cfg.sentinel.master_name + "'";
    }
    request_ = req.take_payload();
    if (steps_.empty())
        state_ = state::done;
}

handshake::state handshake::decide(state s, error_code ec, std::string said)
{
    state_ = s;
    ec_ = ec;
    said_ = std::move(said);
    return state_;
}

handshake::state handshake::feed(const reply& r)
{
    if (done())
        return state_;
    const step s = steps_[next_++];
    if (r.is_error()) {
        // NOAUTH: the server wants a password the config does not give.
        const bool auth = s == step::auth || r.str.rfind("NOAUTH", 0) == 0;
        return decide(state::refused, auth ? error::auth_failed : error::handshake_failed, r.str);
    }
    if (s == step::role) {
        std::string role = r.type == reply_type::array && !r.elements.empty() ? r.elements[0].str : "?";
        if (role != "master")
            return decide(state::not_master, error::handshake_failed,
                          "Sentinel named " + where_ + " but its ROLE is " + role);
    }
    if (next_ == steps_.size())
        state_ = state::done;
    return state_;
}

}  // namespace dlock::redis::detail
