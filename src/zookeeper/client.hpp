// SPDX-License-Identifier: BSL-1.0
// The ZooKeeper C client (single-threaded library) driven from an io_context: its socket
// waited on with Asio, a timer for its timeouts. Completions and watches run on the
// executor, never inside the C library (queued there, run after it returns), so they may
// start new requests or close the client.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

typedef struct _zhandle zhandle_t;  // NOLINT: the C library's own name

namespace dlock::zookeeper::detail {

/// The part of a node's Stat the store reads.
struct node_stat {
    std::int64_t czxid = 0;
    std::int64_t ephemeral_owner = 0;
    std::int32_t num_children = 0;
    std::int64_t mtime = 0;    ///< the last write's time, ms since the epoch on the leader's clock
    std::int32_t version = 0;  ///< the data's version (a conditional set or delete names it)
};

class client : public std::enable_shared_from_this<client> {
public:
    using clock = std::chrono::steady_clock;
    using state_fn = std::function<void(int state)>;  // ZOO_*_STATE of the session
    using watch_fn = std::function<void(int type)>;   // ZOO_*_EVENT on the watched path

    /// `hosts`: numeric "ip:port,ip:port[/chroot]" (the C client resolves names with a
    /// blocking call). Null and `err` set if the C client refuses the arguments.
    static std::shared_ptr<client> open(boost::asio::any_io_executor ex, const std::string& hosts,
                                        std::chrono::milliseconds session_timeout, state_fn on_state, std::string& err);
    ~client();

    /// Ends the session (its ephemeral nodes go at once) and the handle. Pending requests
    /// complete with ZCLOSING. Blocks for one round trip when connected (the C library's
    /// close); never call it where that matters more than the nodes going now.
    void close();
    bool closed() const noexcept { return zh_ == nullptr; }

    int state() const;
    std::int64_t session_id() const;
    /// The session timeout the servers granted (0 before the first connect).
    std::chrono::milliseconds negotiated_timeout() const;
    /// Send time of the most recent request the servers answered (the session was alive then).
    clock::time_point confirmed() const noexcept { return confirmed_; }

    /// `ttl` > 0 with ZOO_PERSISTENT_WITH_TTL: the servers delete the node once it has been
    /// unchanged that long and has no children (when they allow TTL nodes at all).
    void create(const std::string& path, const std::string& data, int flags,
                std::function<void(int rc, std::string path, node_stat)> cb, std::int64_t ttl = 0);
    void get_children(const std::string& path, std::function<void(int rc, std::vector<std::string>)> cb,
                      watch_fn watch = {});
    void exists(const std::string& path, std::function<void(int rc, node_stat)> cb, watch_fn watch = {});
    /// A data watch (Curator's choice for the predecessor: no lingering creation watch).
    void get(const std::string& path, std::function<void(int rc, std::string data, node_stat)> cb, watch_fn watch = {});
    /// Deletes a node if its version is `version` (-1: whatever it is).
    void remove(const std::string& path, std::function<void(int rc)> cb, int version = -1);
    /// Replaces a node's data, whatever its version.
    void set(const std::string& path, const std::string& data, std::function<void(int rc)> cb);
    /// Replaces a node's data if its version is `version` (-1: whatever it is); the node's
    /// Stat after the write (its mtime: the servers' time of this write).
    void set(const std::string& path, const std::string& data, int version, std::function<void(int rc, node_stat)> cb);
    /// The server catches up with the leader first: a read sent after it sees every write
    /// committed before it (one whose reply was lost on another connection, too).
    void sync(const std::string& path, std::function<void(int rc)> cb);

    struct call;  // one pending request or watch: the C library's `data`

private:
    client(boost::asio::any_io_executor ex);
    friend struct client_access;

    void pump();
    void on_ready(std::uint64_t gen, int events);
    void kick();
    void drain();
    void started(int rc, std::uint64_t id);
    call* add_call(bool is_watch);

    boost::asio::any_io_executor ex_;
    zhandle_t* zh_ = nullptr;
    boost::asio::posix::stream_descriptor sd_;
    boost::asio::steady_timer timer_;
    std::uint64_t gen_ = 0;
    bool kicked_ = false;
    bool draining_ = false;
    clock::time_point confirmed_{};
    state_fn on_state_;
    std::map<std::uint64_t, std::unique_ptr<call>> calls_;
    std::uint64_t next_call_ = 1;
    std::deque<std::function<void()>> ready_;
};

}  // namespace dlock::zookeeper::detail
