// SPDX-License-Identifier: BSL-1.0
// Sans-io: a renewal or a release of a lease we hold, as a machine of steps (one exec() each).
// The item is read, then changed only if it is still the one read (CAS):
//
//   step \ replies   absent / another's   ours            error / not a lock   changed (EX)
//   read             done: not owned      write           fail (its text)      -
//   write            -                    done: owned     fail                 read again
//
// A renewal's write is `ms <lock> T<ttl> C<cas>` + `md <contended>` (HD there: someone asked
// for the name since); a release's is `md <lock> C<cas>` (NF: gone meanwhile, not owned).
// A race lost max_races times in a row ends with server_busy.
#pragma once

#include "memcached/acquire_steps.hpp"

#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace dlock::memcached {

class owner_steps {
public:
    enum class op : unsigned char {
        renew,
        release
    };
    enum class step : unsigned char {
        read,
        write,
        done
    };
    static constexpr int max_races = acquire_steps::max_races;

    /// `ttl`: the renewal's lease (unused for a release).
    owner_steps(op what, name_keys keys, std::string token, std::chrono::milliseconds ttl = {});

    step current() const noexcept { return step_; }
    std::string bytes() const;
    std::size_t replies() const noexcept { return step_ == step::write && op_ == op::renew ? 2 : 1; }
    step on_replies(const std::vector<proto::reply>& rs);

    boost::system::error_code error() const noexcept { return ec_; }
    const std::string& text() const noexcept { return text_; }
    /// The lease was ours and is renewed / deleted.
    bool owned() const noexcept { return owned_; }
    /// Renewals: another owner asked for the name since the last renewal.
    bool contended() const noexcept { return contended_; }

private:
    step fail(boost::system::error_code ec, std::string text);

    op op_;
    name_keys keys_;
    std::string token_;
    std::chrono::milliseconds ttl_;
    step step_ = step::read;
    recipe::lock_view view_;
    int races_ = 0;
    boost::system::error_code ec_;
    std::string text_;
    bool owned_ = false;
    bool contended_ = false;
};

}  // namespace dlock::memcached
