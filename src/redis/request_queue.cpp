// SPDX-License-Identifier: BSL-1.0
#include "redis/request_queue.hpp"

#include <dlock/error.hpp>

#include <algorithm>

namespace dlock::redis::detail {

void request_queue::take_batch(std::string& out)
{
    std::size_t total = out.size();
    for (const auto& p : queued_)
        total += p->payload.size();
    out.reserve(total);
    for (auto& p : queued_) {
        out += p->payload;
        if (!p->keep_payload) {
            p->payload.clear();
            p->payload.shrink_to_fit();
        }
        if (p->expected == 0) {
            p->state = pending_state::done;
            continue;
        }
        p->state = pending_state::written;
        written_.push_back(std::move(p));
    }
    queued_.clear();
}

std::shared_ptr<pending> request_queue::on_reply(reply r, boost::system::error_code& ec)
{
    ec = {};
    if (written_.empty()) {
        ec = error::protocol_error;
        return nullptr;
    }
    auto& front = written_.front();
    ++front->received;
    if (front->state != pending_state::abandoned)
        front->replies.push_back(std::move(r));
    if (front->received < front->expected)
        return nullptr;
    auto done = std::move(front);
    written_.pop_front();
    if (done->state == pending_state::written)
        done->state = pending_state::done;
    return done;
}

bool request_queue::cancel(const pending& p)
{
    auto it = std::find_if(queued_.begin(), queued_.end(), [&](const auto& q) { return q.get() == &p; });
    if (it != queued_.end()) {
        (*it)->state = pending_state::done;
        queued_.erase(it);
        return true;
    }
    for (auto& w : written_) {
        if (w.get() == &p) {
            w->state = pending_state::abandoned;
            w->replies.clear();
            break;
        }
    }
    return false;
}

std::vector<std::shared_ptr<pending>> request_queue::take_written()
{
    std::vector<std::shared_ptr<pending>> out(std::make_move_iterator(written_.begin()),
                                              std::make_move_iterator(written_.end()));
    written_.clear();
    return out;
}

std::vector<std::shared_ptr<pending>> request_queue::take_pinned()
{
    std::vector<std::shared_ptr<pending>> out;
    for (auto it = queued_.begin(); it != queued_.end();) {
        if ((*it)->pinned) {
            out.push_back(std::move(*it));
            it = queued_.erase(it);
        } else {
            ++it;
        }
    }
    return out;
}

std::vector<std::shared_ptr<pending>> request_queue::take_all()
{
    auto out = take_written();
    for (auto& p : queued_)
        out.push_back(std::move(p));
    queued_.clear();
    return out;
}

}  // namespace dlock::redis::detail
