// SPDX-License-Identifier: BSL-1.0
#include "common/request_pipe.hpp"

#include <dlock/error.hpp>

#include <algorithm>

namespace dlock::detail {

using boost::system::error_code;
using type = pipe_action::type;

request_pipe::request_pipe(pipe_config cfg, std::minstd_rand& rng)
    : cfg_(cfg), rng_(rng), backoff_(cfg.backoff_min, cfg.backoff_max)
{
}

void request_pipe::emit(type t, std::uint64_t id, error_code ec)
{
    actions_.push_back(pipe_action{t, gen_, id, ec, {}});
}

request_pipe::time_point request_pipe::deadline_of(milliseconds timeout, time_point from) const
{
    auto d = timeout.count() > 0 ? timeout : cfg_.request_timeout;
    return d.count() > 0 ? from + d : time_point::max();
}

void request_pipe::connect()
{
    ++gen_;
    writing_ = false;
    state_ = pipe_state::connecting;
    emit(type::connect);
}

void request_pipe::fail(std::deque<entry>& q, error_code ec)
{
    auto all = std::move(q);
    q.clear();
    for (auto& e : all)
        emit(type::complete, e.id, ec);
}

// The connection is done for: what is on the wire fails with `in_flight_ec` (it may have
// run); what is queued waits for the next connection.
void request_pipe::end_connection(error_code in_flight_ec)
{
    fail(sent_, in_flight_ec);
    writing_ = false;
    emit(type::down);
    emit(type::reset);
    state_ = pipe_state::resetting;
}

void request_pipe::issue(time_point now)
{
    bool wrote = false;
    while (state_ == pipe_state::ready && !writing_ && !queued_.empty() &&
           (cfg_.max_in_flight == 0 || sent_.size() < cfg_.max_in_flight)) {
        auto e = queued_.front();
        queued_.pop_front();
        if (!cfg_.deadline_from_request)
            e.deadline = deadline_of(e.timeout, now);
        sent_.push_back(e);
        emit(type::write, e.id);
        wrote = true;
    }
    if (wrote && cfg_.batches) {
        emit(type::flush);
        writing_ = true;
    }
}

// Queued requests whose deadline passed end with `timeout`: they never left, so the
// connection stays. True if one on the wire passed its deadline too.
bool request_pipe::expire_queued(time_point now)
{
    for (auto it = queued_.begin(); it != queued_.end();) {
        if (it->deadline <= now) {
            emit(type::complete, it->id, error::timeout);
            it = queued_.erase(it);
        } else {
            ++it;
        }
    }
    return std::any_of(sent_.begin(), sent_.end(), [now](const entry& e) { return e.deadline <= now; });
}

void request_pipe::rearm()
{
    auto at = state_ == pipe_state::backing_off ? retry_at_ : time_point::max();
    for (auto* q : {&queued_, &sent_})
        for (auto& e : *q)
            at = std::min(at, e.deadline);
    // A timer that is due no later than needed stays: firing early costs one on_timer, while
    // setting it anew for every request costs a timer-queue update each (back-to-back requests).
    if (at == time_point::max() && armed_ != at) {
        armed_ = at;
        return emit(type::cancel_timer);
    }
    if (at >= armed_)
        return;
    armed_ = at;
    actions_.push_back(pipe_action{type::set_timer, gen_, 0, {}, at});
}

void request_pipe::on_request(std::uint64_t id, milliseconds timeout, time_point now)
{
    if (state_ == pipe_state::closed)
        return emit(type::complete, id, error::closed);
    if (cfg_.refused)
        return emit(type::complete, id, error::invalid_option);
    auto deadline = cfg_.deadline_from_request ? deadline_of(timeout, now) : time_point::max();
    queued_.push_back(entry{id, timeout, deadline});
    if (state_ == pipe_state::idle)
        connect();
    issue(now);
    rearm();
}

void request_pipe::on_start(time_point)
{
    if (cfg_.persistent && !cfg_.refused && state_ == pipe_state::idle)
        connect();
}

void request_pipe::on_connected(std::uint64_t gen, time_point now)
{
    if (gen != gen_ || state_ != pipe_state::connecting)
        return;
    state_ = pipe_state::ready;
    backoff_.reset();
    emit(type::up);
    issue(now);
    rearm();
}

void request_pipe::on_connect_failed(std::uint64_t gen, error_code ec, time_point now)
{
    if (gen != gen_ || state_ != pipe_state::connecting)
        return;
    fail(queued_, ec);  // they never left; the caller's own backoff paces a retry
    if (cfg_.persistent) {
        state_ = pipe_state::backing_off;
        retry_at_ = now + backoff_.next(rng_);
    } else {
        state_ = pipe_state::idle;
    }
    rearm();
}

void request_pipe::on_written(std::uint64_t gen, time_point now)
{
    if (gen != gen_ || state_ != pipe_state::ready || !writing_)
        return;
    writing_ = false;
    issue(now);
    rearm();
}

void request_pipe::on_reply(std::uint64_t gen, std::uint64_t id, error_code ec, bool keep, time_point now)
{
    if (gen != gen_ || state_ != pipe_state::ready)
        return;
    if (sent_.empty() || sent_.front().id != id)  // an answer nobody asked for: the stream is garbled
        return on_dropped(gen, error::protocol_error, now);
    sent_.pop_front();
    emit(type::complete, id, ec);
    if (keep)
        issue(now);
    else
        end_connection(error::connection_lost);
    rearm();
}

void request_pipe::on_not_sent(std::uint64_t gen, time_point)
{
    if (gen != gen_ || state_ != pipe_state::ready)
        return;
    while (!sent_.empty()) {  // back to the front of the queue, in order, as never sent
        auto e = sent_.back();
        sent_.pop_back();
        if (!cfg_.deadline_from_request)
            e.deadline = time_point::max();
        queued_.push_front(e);
    }
    end_connection({});
    rearm();
}

void request_pipe::on_dropped(std::uint64_t gen, error_code ec, time_point)
{
    if (gen != gen_ || state_ != pipe_state::ready)
        return;
    end_connection(ec);
    rearm();
}

void request_pipe::on_reset_done(std::uint64_t gen, time_point)
{
    if (gen != gen_ || state_ != pipe_state::resetting)
        return;
    if (!queued_.empty() || cfg_.persistent)
        connect();
    else
        state_ = pipe_state::idle;
    rearm();
}

void request_pipe::on_timer(time_point now)
{
    if (state_ == pipe_state::closed)
        return;
    armed_ = time_point::max();  // it fired
    if (state_ == pipe_state::backing_off && retry_at_ <= now) {
        retry_at_ = time_point::max();
        connect();
    }
    if (expire_queued(now) && state_ == pipe_state::ready) {
        // On the wire: the replies behind it can no longer be matched to their requests.
        for (auto it = sent_.begin(); it != sent_.end();) {
            if (it->deadline <= now) {
                emit(type::complete, it->id, error::timeout);
                it = sent_.erase(it);
            } else {
                ++it;
            }
        }
        end_connection(error::connection_lost);
    }
    rearm();
}

void request_pipe::on_abort(time_point now)
{
    if (state_ == pipe_state::ready)
        return on_dropped(gen_, error::connection_lost, now);
    if (state_ != pipe_state::connecting)
        return;
    fail(queued_, error::connect_failed);
    emit(type::reset);
    state_ = pipe_state::resetting;
    rearm();
}

void request_pipe::on_close()
{
    if (state_ == pipe_state::closed)
        return;
    bool connected = state_ == pipe_state::connecting || state_ == pipe_state::ready;
    fail(sent_, error::closed);
    fail(queued_, error::closed);
    if (connected)
        emit(type::reset);
    state_ = pipe_state::closed;
    retry_at_ = time_point::max();
    rearm();
}

}  // namespace dlock::detail
