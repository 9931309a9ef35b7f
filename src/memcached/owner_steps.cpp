// SPDX-License-Identifier: BSL-1.0
#include "memcached/owner_steps.hpp"

#include <dlock/error.hpp>

namespace dlock::memcached {

using boost::system::error_code;
using kind = proto::reply::kind;

owner_steps::owner_steps(op what, name_keys keys, std::string token, std::chrono::milliseconds ttl)
    : op_(what), keys_(std::move(keys)), token_(std::move(token)), ttl_(ttl)
{
}

std::string owner_steps::bytes() const
{
    if (step_ == step::read)
        return proto::mg(keys_.lock, "v c");
    if (step_ != step::write)
        return {};
    auto cas = "C" + std::to_string(view_.cas);
    if (op_ == op::release)  // delete only the item read: a CAS mismatch means it changed hands
        return proto::md(keys_.lock, cas);
    return proto::ms(keys_.lock, recipe::value(token_, view_.fence), recipe::ttl_flag(ttl_) + " " + cas) +
           proto::md(keys_.contended, "");
}

owner_steps::step owner_steps::fail(error_code ec, std::string text)
{
    ec_ = ec;
    text_ = std::move(text);
    owned_ = contended_ = false;
    return step_ = step::done;
}

owner_steps::step owner_steps::on_replies(const std::vector<proto::reply>& rs)
{
    if (step_ == step::done)
        return step_;
    if (rs.size() != replies())
        return fail(error::protocol_error, {});
    for (const auto& r : rs)
        if (auto ec = recipe::error_of(r))
            return fail(ec, r.text.empty() ? "dlock: " + keys_.lock_text +
                                                 ": the server answered ERROR (it does not speak the meta protocol)"
                                           : r.text);
    if (step_ == step::read) {
        if (auto ec = recipe::read_lock(rs[0], view_))
            return fail(ec, "dlock: the key " + keys_.lock_text + " holds something that is not a dlock lock");
        if (!view_.present || view_.owner != token_)
            return step_ = step::done;  // not ours (any more): nothing to change
        return step_ = step::write;
    }
    if (rs[0].k == kind::ex) {  // changed under us (a retry of ours): read again
        if (++races_ < max_races)
            return step_ = step::read;
        return fail(error::server_busy,
                    "dlock: " + std::to_string(max_races) + " races in a row on " + keys_.lock_text);
    }
    owned_ = rs[0].k == kind::hd;
    contended_ = op_ == op::renew && owned_ && rs[1].k == kind::hd;
    return step_ = step::done;
}

}  // namespace dlock::memcached
