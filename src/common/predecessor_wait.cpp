// SPDX-License-Identifier: BSL-1.0
#include "common/predecessor_wait.hpp"

namespace dlock::detail {

void predecessor_wait::check()
{
    state_ = wait_state::checking;
    check_again_ = false;
    emit(type::check);
}

void predecessor_wait::drop_watch()
{
    if (watching_.empty())
        return;
    watching_.clear();
    emit(type::cancel_watch);
}

void predecessor_wait::end(bool tell_resync)
{
    if (state_ == wait_state::pausing)
        emit(type::cancel_timer);
    drop_watch();
    state_ = wait_state::done;
    if (tell_resync)
        emit(type::resync);
}

void predecessor_wait::fail()
{
    if (!rng_)
        return end(true);
    state_ = wait_state::pausing;
    emit(type::set_timer, {}, pause_.next(*rng_));
}

void predecessor_wait::start()
{
    if (state_ == wait_state::idle)
        check();
}

void predecessor_wait::on_first()
{
    if (state_ != wait_state::checking)
        return;
    end(false);
    emit(type::grant);
}

void predecessor_wait::on_gone()
{
    if (state_ == wait_state::checking)
        end(true);  // withdrawn, or gone with its session or lease
}

void predecessor_wait::on_behind(const std::string& key, std::int64_t revision)
{
    if (state_ != wait_state::checking)
        return;
    pause_.reset();
    checked_ = revision;
    if (check_again_)
        return check();  // the one watched went (or moved) while we read: read again
    state_ = wait_state::watching;
    if (watching_ == key)
        return;  // a read after the watch was made: the same key, watched already
    drop_watch();
    watching_ = key;
    emit(type::watch, key);
}

void predecessor_wait::on_check_failed()
{
    if (state_ == wait_state::checking)
        fail();
}

// A watch that starts after the read may miss what happened in between: if it starts
// past the read's revision, read again (the store's watch of a key starts "now").
void predecessor_wait::on_watch_ready(const std::string& key, std::int64_t revision)
{
    if (key != watching_ || revision <= checked_)
        return;
    if (state_ == wait_state::watching)
        check();
    else if (state_ == wait_state::checking)
        check_again_ = true;
}

void predecessor_wait::on_predecessor_gone(const std::string& key)
{
    if (key.empty() || key != watching_)
        return;
    drop_watch();
    if (state_ == wait_state::watching)
        check();
    else if (state_ == wait_state::checking)
        check_again_ = true;
}

void predecessor_wait::on_watch_failed(const std::string& key)
{
    if (key.empty() || key != watching_)
        return;
    drop_watch();
    if (state_ == wait_state::watching || (state_ == wait_state::checking && !rng_))
        fail();  // while checking and retrying: the read in flight watches its place anew
}

void predecessor_wait::on_timer()
{
    if (state_ == wait_state::pausing)
        check();
}

void predecessor_wait::on_lost()
{
    if (state_ != wait_state::done)
        end(true);
}

void predecessor_wait::on_abandon()
{
    if (state_ != wait_state::done)
        end(false);
}

}  // namespace dlock::detail
