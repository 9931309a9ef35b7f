// SPDX-License-Identifier: BSL-1.0
// Sans-io pipelining core: which request a reply belongs to, what to write next, and what a
// cancellation may undo. No sockets, timers or handlers here; tested without a server.
#pragma once

#include <dlock/redis/reply.hpp>

#include <boost/container/small_vector.hpp>
#include <boost/system/error_code.hpp>

#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace dlock::redis::detail {

enum class pending_state : unsigned char {
    queued,     // not yet handed to the writer: cancelling removes it entirely
    written,    // on the wire: its replies must still be read to keep the stream in sync
    abandoned,  // written, but its caller gave up: replies are read and dropped
    done,
};

/// One request's bookkeeping. The I/O layer derives from it to attach a handler and a timer.
struct pending {
    virtual ~pending() = default;
    std::string payload;
    std::size_t expected = 0;  // replies to read; 0 = fire-and-forget (subscribe mode)
    // Most requests (every script call) have one reply: it is kept inline, not allocated.
    boost::container::small_vector<reply, 1> replies;
    std::size_t received = 0;  // counts replies even when abandoned ones are dropped
    pending_state state = pending_state::queued;
    bool pinned = false;        // only for the connection it was queued on: never written on a later one
    bool keep_payload = false;  // kept while on the wire (a script call may be sent again as EVAL)
};

class request_queue {
public:
    void push(std::shared_ptr<pending> p) { queued_.push_back(std::move(p)); }
    /// Requests that must precede everything queued (re-subscription after a reconnect).
    void push_front(std::shared_ptr<pending> p) { queued_.push_front(std::move(p)); }

    bool has_queued() const noexcept { return !queued_.empty(); }
    std::size_t queued_count() const noexcept { return queued_.size(); }
    std::size_t written_count() const noexcept { return written_.size(); }

    /// Moves every queued request onto the wire in one batch, appending its bytes to `out`
    /// (the writer's buffer, reused from write to write).
    void take_batch(std::string& out);
    std::string take_batch()
    {
        std::string out;
        take_batch(out);
        return out;
    }

    /// Gives `r` to the oldest written request. Returns that request once it has all its
    /// replies (abandoned ones too: the caller drops them), else nullptr. A reply with no
    /// request waiting for it sets `ec` to protocol_error.
    std::shared_ptr<pending> on_reply(reply r, boost::system::error_code& ec);

    /// A queued request is removed (returns true: nothing reached the server). A written
    /// one is marked abandoned so its replies are skipped later (returns false).
    bool cancel(const pending& p);

    /// On connection loss: every request on the wire. Queued ones stay for the next connection.
    std::vector<std::shared_ptr<pending>> take_written();

    /// On connection loss, after take_written(): the queued requests pinned to that connection
    /// (they must not go out on the next one). Unpinned ones stay queued.
    std::vector<std::shared_ptr<pending>> take_pinned();

    /// On close: everything.
    std::vector<std::shared_ptr<pending>> take_all();

private:
    std::deque<std::shared_ptr<pending>> queued_;
    std::deque<std::shared_ptr<pending>> written_;
};

}  // namespace dlock::redis::detail
