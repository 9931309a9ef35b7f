// SPDX-License-Identifier: BSL-1.0
// Sans-io: one memcached acquire as a machine of steps. Each step is one exec() on the
// name's server (its bytes and how many replies); the replies decide the next step:
//
//   step \ replies   EN / HD / VA      VA ours          VA other        error / not a lock   race lost (NS, EX, NF)
//   read             add (EN)          refresh (CAS);   mark_contended  fail (its text)      -
//                                      fence 0: next_fence
//   add              next_fence (HD c) -                -               fail                 read again
//   next_fence       set_fence (VA n)  -                -               fail                 -
//   set_fence        done: acquired    -                -               fail                 read again
//   refresh          done: acquired    -                -               fail                 read again
//   mark_contended   done: refused with the holder's remaining lease    fail                 -
//   withdraw         done (with the error that led here), whatever it answers
//
// A failure after our item was added and before its fence was set (a fence key that is not
// a counter, an error reply to `ma` or to the CAS set) withdraws the item first; an add
// answered without its CAS (a server too old for the `c` flag) cannot, and fails at once.
//
// The fence is drawn only once the item is ours (added with fence 0, then set to the fence by
// CAS): a draw made before the add could be granted after a later one (dlock_sim, memcached
// seed 136: A drew 5, B drew 6, added, released, then A added with 5), one made while holding
// the item is granted (or dropped, if the CAS finds the item gone) before the next holder's.
//
// A race lost max_races times in a row ends with server_busy: contention reported, not spun on.
// The driver (src/memcached/store.cpp) sends each step and feeds its replies back; an exec()
// that fails ends the acquire with its error, without the machine.
#pragma once

#include <dlock/store.hpp>

#include "memcached/protocol.hpp"
#include "memcached/recipe.hpp"

#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace dlock::memcached {

/// The keys of one name, all on the name's server.
struct name_keys {
    proto::wire_key lock, fence, contended;
    std::string lock_text;
    bool ok() const { return !lock.text.empty() && !fence.text.empty() && !contended.text.empty(); }
};

class acquire_steps {
public:
    enum class step : unsigned char {
        read,            ///< mg <lock> v c t
        add,             ///< ms <lock> ME c (add "<token> 0") + md <contended>
        next_fence,      ///< ma <fence> N0 J1 v
        set_fence,       ///< ms <lock> C<cas> ("<token> <fence>")
        refresh,         ///< ms <lock> C<cas> (ours already: a retry)
        mark_contended,  ///< ms <contended> 1
        withdraw,        ///< md <lock> C<cas>: our item, after a failure before its fence was set
        done             ///< result() / error() / text() say how it ended
    };
    /// Lost races in a row before the acquire gives up with server_busy.
    static constexpr int max_races = 8;

    acquire_steps(name_keys keys, std::string token, std::chrono::milliseconds ttl);

    step current() const noexcept { return step_; }
    /// The current step's bytes and how many replies they bring.
    std::string bytes() const;
    std::size_t replies() const noexcept { return step_ == step::add ? 2 : 1; }
    /// The current step's replies (as many as replies() said); the machine moves on.
    step on_replies(const std::vector<proto::reply>& rs);

    boost::system::error_code error() const noexcept { return ec_; }
    /// The store's own words when it failed (empty if none): the store's error text.
    const std::string& text() const noexcept { return text_; }
    const acquire_result& result() const noexcept { return out_; }

private:
    step fail(boost::system::error_code ec, std::string text);
    step raced();
    step after_read(const proto::reply& r);

    name_keys keys_;
    std::string token_;
    std::chrono::milliseconds ttl_;
    step step_ = step::read;
    recipe::lock_view view_;
    std::uint64_t fence_ = 0;
    long long cas_ = 0;  // our item's, once added (or read back with fence 0)
    int races_ = 0;
    boost::system::error_code ec_;
    std::string text_;
    acquire_result out_;
};

}  // namespace dlock::memcached
