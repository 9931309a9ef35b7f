// SPDX-License-Identifier: BSL-1.0
#include "redis/tx_recipe.hpp"

#include <dlock/error.hpp>

#include "core/kind_text.hpp"

#include <charconv>

namespace dlock::redis::tx {

namespace {

using boost::system::error_code;

bool as_int(const reply& r, long long& out)
{
    if (r.type != reply_type::integer)
        return false;
    out = r.integer;
    return true;
}

// A counter or fence as stored by the recipe: decimal digits; nil is 0.
bool as_number(const reply& r, long long& out)
{
    if (r.is_nil()) {
        out = 0;
        return true;
    }
    if (r.type != reply_type::string && r.type != reply_type::integer)
        return false;
    if (r.type == reply_type::integer)
        return out = r.integer, true;
    auto [p, ec] = std::from_chars(r.str.data(), r.str.data() + r.str.size(), out);
    return ec == std::errc() && p == r.str.data() + r.str.size() && out >= 0;
}

// The HMGET reply of the reads: owner, then the other fields asked for.
const reply* fields(const response& reads, std::size_t at, std::size_t n)
{
    if (reads.size() <= at || reads[at].type != reply_type::array || reads[at].elements.size() != n)
        return nullptr;
    return &reads[at];
}

// MULTI's OK, a QUEUED per command, then EXEC: nil (conflict) or one reply per command.
outcome exec_reply(const response& w, std::size_t commands, const reply*& exec, error_code& ec)
{
    if (w.size() != commands + 2) {
        ec = error::invalid_request;
        return outcome::failed;
    }
    exec = &w.back();
    if (exec->is_nil())
        return outcome::conflict;
    if (exec->type != reply_type::array || exec->elements.size() != commands) {
        ec = error::invalid_request;
        return outcome::failed;
    }
    return outcome::committed;
}

}  // namespace

request read_acquire(const names& k)
{
    request r;
    r.push("UNWATCH");  // a previous read whose plan wrote nothing left its WATCH behind
    r.push("WATCH", k.lock, k.fence);
    r.push("HMGET", k.lock, "owner", "fence", "contended", "set");
    r.push("PTTL", k.lock);
    r.push("GET", k.fence);
    return r;
}

namespace {

// A read-write lock's or a semaphore's name (set_scripts.hpp marks it): "0" or N.
void refuse_marked(plan<acquire_result>& p, const reply& mark)
{
    long long permits = 0;
    p.ec = as_number(mark, permits) ? error::kind_mismatch : error::invalid_request;
    if (p.ec == error::kind_mismatch)
        p.why = permits == 0
                    ? dlock::detail::kind_in_use_text(lease_kind::read)
                    : dlock::detail::kind_in_use_text(lease_kind::permit, static_cast<unsigned long long>(permits));
}

// Free. The counter is watched: if the INCR runs, it gives exactly counter + 1.
void plan_take(plan<acquire_result>& p, const names& k, const std::string& token, std::chrono::milliseconds ttl,
               long long counter)
{
    p.new_fence = counter + 1;
    p.result.acquired = true;
    p.result.fencing_token = static_cast<std::uint64_t>(p.new_fence);
    p.result.granted_ttl = ttl;
    p.write.push("MULTI");
    p.write.push("INCR", k.fence);
    p.write.push("HSET", k.lock, "owner", token, "fence", p.new_fence);
    p.write.push("PEXPIRE", k.lock, ttl.count());
    p.write.push("EXEC");
}

// Ours already (a retry): extend the lease, keeping its fence.
void plan_extend(plan<acquire_result>& p, const reply& fence_field, const names& k, std::chrono::milliseconds ttl)
{
    long long fence = 0;
    if (!as_number(fence_field, fence) || fence < 1) {
        p.ec = error::protocol_error;
        return;
    }
    p.result.acquired = true;
    p.result.fencing_token = static_cast<std::uint64_t>(fence);
    p.result.granted_ttl = ttl;
    p.write.push("MULTI");
    p.write.push("PEXPIRE", k.lock, ttl.count());
    p.write.push("EXEC");
}

// Another owner's: report its PTTL, and mark the name contended unless it already is.
void plan_contend(plan<acquire_result>& p, const reply& contended, const names& k, long long pttl)
{
    p.result.holder_ttl = std::chrono::milliseconds(pttl < 0 ? -1 : pttl);
    if (!contended.is_nil()) {
        p.done = true;  // the holder already knows someone asked
        return;
    }
    // Tell the holder that another owner wants the name, so it stops handing off locally.
    // The lock is watched: if it expired meanwhile, EXEC refuses rather than create a bare hash.
    p.write.push("MULTI");
    p.write.push("HSET", k.lock, "contended", "1");
    p.write.push("EXEC");
}

}  // namespace

plan<acquire_result> plan_acquire(const response& reads, const names& k, const std::string& token,
                                  std::chrono::milliseconds ttl)
{
    plan<acquire_result> p;
    const reply* f = fields(reads, 2, 4);
    long long pttl = 0, counter = 0;
    if (!f || reads.size() != 5 || !as_int(reads[3], pttl) || !as_number(reads[4], counter)) {
        p.ec = error::invalid_request;
        return p;
    }
    const reply& owner = f->elements[0];
    if (!f->elements[3].is_nil())
        refuse_marked(p, f->elements[3]);
    else if (owner.is_nil())
        plan_take(p, k, token, ttl, counter);
    else if (owner.type != reply_type::string)
        p.ec = error::invalid_request;
    else if (owner.str == token)
        plan_extend(p, f->elements[1], k, ttl);
    else
        plan_contend(p, f->elements[2], k, pttl);
    return p;
}

outcome finish_acquire(const response& written, const plan<acquire_result>& p, acquire_result& out, error_code& ec)
{
    const reply* exec = nullptr;
    std::size_t commands = p.new_fence > 0 ? 3 : 1;
    auto o = exec_reply(written, commands, exec, ec);
    if (o != outcome::committed)
        return o;
    long long fence = 0;
    if (p.new_fence > 0 && !(as_int(exec->elements[0], fence) && fence == p.new_fence)) {
        ec = error::protocol_error;  // the watched counter moved under a committed transaction
        return outcome::failed;
    }
    out = p.result;
    return outcome::committed;
}

request read_owner(const names& k)
{
    request r;
    r.push("UNWATCH");
    r.push("WATCH", k.lock);
    r.push("HMGET", k.lock, "owner", "contended");
    return r;
}

plan<renew_result> plan_renew(const response& reads, const names& k, const std::string& token,
                              std::chrono::milliseconds ttl)
{
    plan<renew_result> p;
    const reply* f = fields(reads, 2, 2);
    if (!f || reads.size() != 3) {
        p.ec = error::invalid_request;
        return p;
    }
    const reply& owner = f->elements[0];
    if (owner.type != reply_type::string || owner.str != token) {
        p.done = true;  // not ours (or gone): nothing to extend
        return p;
    }
    p.result.owned = true;
    p.write.push("MULTI");
    p.write.push("PEXPIRE", k.lock, ttl.count());
    p.write.push("HDEL", k.lock, "contended");
    p.write.push("EXEC");
    return p;
}

outcome finish_renew(const response& written, renew_result& out, error_code& ec)
{
    const reply* exec = nullptr;
    auto o = exec_reply(written, 2, exec, ec);
    if (o != outcome::committed)
        return o;
    long long extended = 0, cleared = 0;
    if (!as_int(exec->elements[0], extended) || !as_int(exec->elements[1], cleared)) {
        ec = error::invalid_request;
        return outcome::failed;
    }
    out = renew_result{extended == 1, extended == 1 && cleared == 1};
    return outcome::committed;
}

plan<bool> plan_release(const response& reads, const names& k, const std::string& token)
{
    plan<bool> p;
    const reply* f = fields(reads, 2, 2);
    if (!f || reads.size() != 3) {
        p.ec = error::invalid_request;
        return p;
    }
    const reply& owner = f->elements[0];
    if (owner.type != reply_type::string || owner.str != token) {
        p.done = true;
        return p;
    }
    p.result = true;
    p.write.push("MULTI");
    p.write.push("UNLINK", k.lock);
    p.write.push("PUBLISH", k.released, "released");
    p.write.push("EXEC");
    return p;
}

outcome finish_release(const response& written, bool& out, error_code& ec)
{
    const reply* exec = nullptr;
    auto o = exec_reply(written, 2, exec, ec);
    if (o != outcome::committed)
        return o;
    long long unlinked = 0;
    if (!as_int(exec->elements[0], unlinked)) {
        ec = error::invalid_request;
        return outcome::failed;
    }
    out = unlinked == 1;
    return outcome::committed;
}

request force_release(const names& k)
{
    request r;
    r.push("MULTI");
    r.push("HDEL", k.lock, "owner", "fence", "contended", "queued", "value");
    r.push("PUBLISH", k.released, "released");
    r.push("EXEC");
    return r;
}

error_code decode_force_release(const response& written, bool& out)
{
    const reply* exec = nullptr;
    error_code ec;
    auto o = exec_reply(written, 2, exec, ec);
    long long fields = 0;
    if (o != outcome::committed || !as_int(exec->elements[0], fields))
        return error::invalid_request;
    out = fields > 0;  // a lease's hash has at least its owner and fence
    return {};
}

request status(const names& k)
{
    request r;
    r.push("MULTI");
    r.push("HMGET", k.lock, "owner", "fence");
    r.push("PTTL", k.lock);
    r.push("GET", k.fence);
    r.push("LLEN", k.queue);
    r.push("EXEC");
    return r;
}

error_code decode_status(const response& written, lock_status& out)
{
    const reply* exec = nullptr;
    error_code ec;
    if (exec_reply(written, 4, exec, ec) != outcome::committed)
        return error::invalid_request;
    const auto& e = exec->elements;
    long long fence = 0, pttl = 0, counter = 0, queued = 0;
    if (e[0].type != reply_type::array || e[0].elements.size() != 2 || !as_number(e[0].elements[1], fence) ||
        !as_int(e[1], pttl) || !as_number(e[2], counter) || !as_int(e[3], queued))
        return error::invalid_request;
    out = lock_status{};
    out.held = e[0].elements[0].type == reply_type::string;
    out.holder = out.held ? e[0].elements[0].str : std::string();
    out.fencing_token = static_cast<std::uint64_t>(fence);
    out.ttl = std::chrono::milliseconds(pttl < 0 ? -1 : pttl);
    out.last_fencing_token = static_cast<std::uint64_t>(counter);
    out.queued = static_cast<std::size_t>(queued < 0 ? 0 : queued);
    return {};
}

std::string first_error(const response& r)
{
    for (const auto& x : r) {
        if (x.is_error())
            return x.str;
        if (x.type == reply_type::array)  // EXEC's replies: a command that failed at run time
            for (const auto& y : x.elements)
                if (y.is_error())
                    return y.str;
    }
    return {};
}

}  // namespace dlock::redis::tx
