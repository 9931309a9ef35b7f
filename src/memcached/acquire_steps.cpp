// SPDX-License-Identifier: BSL-1.0
#include "memcached/acquire_steps.hpp"

#include <dlock/error.hpp>

namespace dlock::memcached {

using boost::system::error_code;
using kind = proto::reply::kind;

acquire_steps::acquire_steps(name_keys keys, std::string token, std::chrono::milliseconds ttl)
    : keys_(std::move(keys)), token_(std::move(token)), ttl_(ttl)
{
}

std::string acquire_steps::bytes() const
{
    switch (step_) {
    case step::read: return proto::mg(keys_.lock, "v c t");
    case step::add:
        return proto::ms(keys_.lock, recipe::value(token_, 0), recipe::ttl_flag(ttl_) + " ME c") +
               proto::md(keys_.contended, "");
    case step::next_fence: return proto::ma(keys_.fence, "N0 J1 v");
    case step::set_fence:
        return proto::ms(keys_.lock, recipe::value(token_, fence_),
                         recipe::ttl_flag(ttl_) + " C" + std::to_string(cas_));
    case step::refresh:
        return proto::ms(keys_.lock, recipe::value(token_, view_.fence),
                         recipe::ttl_flag(ttl_) + " C" + std::to_string(view_.cas));
    case step::mark_contended: return proto::ms(keys_.contended, "1", recipe::ttl_flag(ttl_));
    case step::withdraw: return proto::md(keys_.lock, "C" + std::to_string(cas_));
    case step::done: return {};
    }
    return {};
}

acquire_steps::step acquire_steps::fail(error_code ec, std::string text)
{
    ec_ = ec;
    text_ = std::move(text);
    out_ = acquire_result{};
    // Our item added (or found at fence 0) and no fence set: deleted by its CAS before the
    // error is told, or it would block the name for a whole TTL.
    bool ours = (step_ == step::next_fence || step_ == step::set_fence) && cas_ != 0;
    return step_ = ours ? step::withdraw : step::done;
}

// A CAS or add that lost a race reads again, up to max_races times in a row.
acquire_steps::step acquire_steps::raced()
{
    if (++races_ < max_races)
        return step_ = step::read;
    return fail(error::server_busy, "dlock: " + std::to_string(max_races) + " races in a row on " + keys_.lock_text);
}

acquire_steps::step acquire_steps::after_read(const proto::reply& r)
{
    if (auto ec = recipe::read_lock(r, view_))
        return fail(ec, r.text.empty()
                            ? "dlock: the key " + keys_.lock_text + " holds something that is not a dlock lock"
                            : r.text);
    if (!view_.present)
        return step_ = step::add;
    if (view_.owner != token_)
        return step_ = step::mark_contended;
    if (view_.fence != 0)
        return step_ = step::refresh;
    cas_ = view_.cas;  // ours, added by an earlier round whose fence was not set yet
    return step_ = step::next_fence;
}

acquire_steps::step acquire_steps::on_replies(const std::vector<proto::reply>& rs)
{
    if (step_ == step::done)
        return step_;
    if (step_ == step::withdraw)  // whatever it answers, the error stays the one it failed with
        return step_ = step::done;
    if (rs.size() != replies())
        return fail(error::protocol_error, {});
    for (const auto& r : rs)  // an error reply fails any step, with its text
        if (auto ec = recipe::error_of(r))
            return fail(ec, r.text.empty() ? "dlock: " + keys_.lock_text +
                                                 ": the server answered ERROR (it does not speak the meta protocol)"
                                           : r.text);
    switch (step_) {
    case step::read: return after_read(rs[0]);
    case step::add: {
        auto cas = rs[0].number('c');
        if (rs[0].k != kind::hd)  // NS: added by another first
            return raced();
        if (!cas)
            return fail(error::protocol_error, "dlock: " + keys_.lock_text + ": the add's reply carries no CAS");
        cas_ = *cas;
        return step_ = step::next_fence;
    }
    case step::next_fence:
        if (auto ec = recipe::read_counter(rs[0], fence_))
            return fail(ec, rs[0].text);
        return step_ = step::set_fence;
    case step::set_fence:
    case step::refresh:
        if (rs[0].k != kind::hd)  // NS: added by another first; EX / NF: it changed
            return raced();
        out_ = acquire_result{};
        out_.acquired = true;
        out_.fencing_token = step_ == step::set_fence ? fence_ : view_.fence;
        out_.granted_ttl = ttl_;
        return step_ = step::done;
    case step::mark_contended:  // held by another owner: its next renewal reports contended
        out_ = acquire_result{};
        out_.holder_ttl = recipe::holder_ttl(view_);
        return step_ = step::done;
    case step::withdraw:
    case step::done: break;
    }
    return step_;
}

}  // namespace dlock::memcached
