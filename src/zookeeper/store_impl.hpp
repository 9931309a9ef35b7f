// SPDX-License-Identifier: BSL-1.0
// zookeeper_store's state and the driver's steps, one file per topic: the session that
// carries every node of the store (session.cpp), an acquire round (acquire.cpp; what its
// replies mean is acquire_round.hpp's), a release (release.cpp), a queued token's wait for
// the node before its own (queue.cpp), a name's untokened watch (name_watch.cpp), status
// and elections (status.cpp), the contract's entry points (store.cpp). The kit gives the session's life, the watch
// table and the acquire/release order.
#pragma once

#include <dlock/error.hpp>
#include <dlock/zookeeper/store.hpp>

#include "common/post_completion.hpp"
#include "common/predecessor_wait.hpp"
#include "common/session_store_state.hpp"
#include "common/stored_handler.hpp"
#include "zookeeper/acquire_round.hpp"
#include "zookeeper/client.hpp"
#include "zookeeper/permit_round.hpp"
#include "zookeeper/recipe.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <map>
#include <optional>

namespace dlock {

namespace zookeeper::detail {
/// A ZooKeeper return code as an acquire round judges it.
zookeeper::reply reply_of(int rc);
/// What a path is in use as, in the contract's words, from one of its contenders' kind.
lease_kind lease_kind_of(zookeeper::recipe::node_kind k);
}  // namespace zookeeper::detail

struct zookeeper_store::impl
    : dlock::detail::session_store_state<zookeeper::config, zookeeper_store::error_text_keeper>,
      std::enable_shared_from_this<impl> {
    using acquire_ptr = std::shared_ptr<boost::asio::any_completion_handler<acquire_signature>>;
    using release_ptr = std::shared_ptr<boost::asio::any_completion_handler<bool_signature>>;

    impl(boost::asio::any_io_executor e, zookeeper::config c, error_text_keeper keep)
        : session_store_state(e, std::move(c), std::move(keep)), resolver(e), connect_timer(e), deadline_timer(e),
          ping_timer(e)
    {
    }

    boost::asio::ip::tcp::resolver resolver;

    // ---- the session (session.cpp; life and gate in the kit's state) ----
    std::shared_ptr<zookeeper::detail::client> zk;
    std::int64_t session_id = 0;  // 0: none trusted
    milliseconds timeout{0};      // negotiated
    boost::asio::steady_timer connect_timer, deadline_timer, ping_timer;

    void heard();  // any answered request dates the session
    clock_type::time_point deadline();
    session_info info();
    void ensure_session(std::function<void(error_code)> cont);
    void opening_ended(error_code ec);  // the opening succeeded (ec empty) or failed
    void open_session();
    void resolved(std::vector<std::string> hosts, const std::string& failed);
    void start_client(const std::string& hosts);
    void drop_client();
    void on_state(int state);
    void on_connected();
    void confirm_session(std::int64_t id);
    void arm_ping();
    void arm_deadline();
    void session_gone(std::string why);
    // A ZooKeeper return code as the contract's error.
    error_code to_error(int rc, const std::string& what);

    // ---- per (name, token): the node this session made for it ----
    struct node_state {
        std::string node;  // full path; empty while unknown
        std::int64_t czxid = 0;
        bool uncertain = false;  // a create's reply was lost: look for the guid before creating again
        bool held = false;
        // Other kinds were looked for once our node existed: any made later sees ours, so
        // later rounds need not look again (a waiter is not refused by a later comer).
        bool kind_checked = false;
    };
    std::map<key_pair, node_state> nodes;

    std::string path_of(const std::string& name) const;
    // Where an acquire round of `kind` makes its node: the name's path, or a semaphore's
    // internal mutex under it (`<path>/locks`).
    std::string round_path(const std::string& name, lease_kind kind) const;
    // Why a name's lock path cannot be sent (empty if it can): over the servers' jute.maxbuffer.
    static std::string too_long(const std::string& path, std::size_t token_size);
    // An operation on a name refused before any request: closed, or a name too long (its text kept).
    error_code refused(const std::string& name);

    // ---- what a name holds (status.cpp): status, and an election's leader with its value ----
    // The name's status and the first node's data (an election's proclaimed value).
    void read_status(const std::string& name, std::function<void(error_code, lock_status, std::string)> done);
    void answer_status(const std::string& name, boost::asio::any_completion_handler<status_signature> h,
                       bool with_value);

    // ---- an acquire round (acquire.cpp) ----
    // One round's replies (a create and a getChildren, or the latter alone).
    struct round_replies {
        bool create_sent = false;
        bool semaphore_checked = false;      // a semaphore's nodes under the name were looked at
        bool latch_checked = false;          // a latch node under the name was found expired and deleted
        int create_rc = 1, children_rc = 1;  // 1: not come yet (0 is ZOK)
        std::string node;
        zookeeper::detail::node_stat stat;
        std::vector<std::string> children;
    };
    // What a round is for and where it stands.
    struct round_ctx {
        lease_request req;
        std::string path;
        key_pair key;
        std::int64_t sid = 0;
        clock_type::time_point sent{};
        bool retried = false, parents_made = false;
    };
    void acquire(const lease_request& req, boost::asio::any_completion_handler<acquire_signature> h, bool retried);
    void acquired(const lease_request& req, boost::asio::any_completion_handler<acquire_signature> h, error_code ec,
                  acquire_result res);
    void send_acquire(const lease_request& req, boost::asio::any_completion_handler<acquire_signature> h, bool retried,
                      bool parents_made = false);
    void find_lost_create(const round_ctx& c, const acquire_ptr& hp);
    void judge_round(const round_ctx& c, const acquire_ptr& hp, round_replies& st);
    // The path's missing parents: persistent, but the last `containers` (the lock path, and a
    // semaphore's path above its `locks` or `leases`) as containers the servers reap once empty.
    void make_parents(const std::string& path, std::function<void(int)> done, std::size_t containers = 1);
    // The lock path (a semaphore's `locks` and the name's path above it) made, then the round again.
    void make_lock_path(const round_ctx& c, const acquire_ptr& hp);
    void make_parent(std::shared_ptr<std::vector<std::string>> chain, std::size_t i, std::size_t containers,
                     std::function<void(int)> done);
    // Another kind's round found a semaphore's `locks` or `leases` under the name: in use if
    // either has children (else they are containers not reaped yet), then judged again.
    void check_semaphore(const round_ctx& c, const acquire_ptr& hp, std::shared_ptr<round_replies> st);
    // A latch's node under the name: alive refuses the round (kind_mismatch), expired is deleted.
    void check_latch(const round_ctx& c, const acquire_ptr& hp, std::shared_ptr<round_replies> st);
    void check_owner(const round_ctx& c, const std::string& node, const acquire_ptr& hp);
    void grant(const round_ctx& c, const acquire_ptr& hp);
    void not_first(const round_ctx& c, std::size_t contenders, const acquire_ptr& hp);
    void withdraw(const round_ctx& c, const acquire_ptr& hp, error_code ec);

    // ---- a release (release.cpp) ----
    void release(const lease_key& k, boost::asio::any_completion_handler<bool_signature> h, bool again = false);
    void find_lost_node(const lease_key& k, const release_ptr& hp);
    bool release_later(int rc, std::int64_t sid, const lease_key& k, const release_ptr& hp);

    // ---- watches (the table in the kit's state): queued tokens (queue.cpp), names (name_watch.cpp) ----
    // A queued token waiting for the node before its own to go: the kit's machine decides
    // (common/predecessor_wait.hpp; a failed read ends the wait), queue.cpp reads and watches.
    struct queued {
        std::string name, token, path;
        milliseconds ttl{0};
        std::int64_t session = 0;
        bool permit = false;
        dlock::detail::predecessor_wait wait{};
    };
    using queued_ptr = std::shared_ptr<queued>;
    dlock::detail::wait_queue<queued> queue{[this](const queued_ptr& q, auto& a) { perform(q, a); }};

    // `path`: where the token's node waits (round_path); a semaphore's acquirer first under
    // its `locks` holds no permit yet: it is told to try again (resync), not granted.
    void start_queued(const std::string& name, const std::string& token, const std::string& path, milliseconds ttl,
                      bool permit);
    void perform(const queued_ptr& q, const dlock::detail::wait_action& a);
    void read_place(const queued_ptr& q);
    void watch_predecessor(const queued_ptr& q, const std::string& pred);
    void grant_queued(const queued_ptr& q);

    // ---- a semaphore's lease phase, once first under its `locks` (permit.cpp) ----
    // The token's lease node under `leases`; its node under `locks` is in `nodes` meanwhile.
    std::map<key_pair, node_state> leases;
    // Queued tokens holding `locks` while every permit is taken: the epoch of the children
    // watch on `leases` that wakes them (one that fires for an older epoch is ignored).
    std::map<key_pair, std::uint64_t> permit_waits;
    std::uint64_t permit_epochs = 0;
    // One round's replies: the lease node's create, the children of `leases` and of the name.
    struct permit_replies {
        bool create_sent = false, parents_made = false, retaken = false;
        bool latch_checked = false, latch_alive = false;  // a latch node under the name, looked at
        int create_rc = 1, leases_rc = 1, path_rc = 1;    // 1: not come yet
        std::string node{};
        zookeeper::detail::node_stat stat{};
        std::vector<std::string> leases{}, children{};
    };
    void take_permit(const round_ctx& c, const acquire_ptr& hp, bool parents_made = false);
    void find_lost_lease(const round_ctx& c, const acquire_ptr& hp);
    zookeeper::permit_round permit_round_of(const round_ctx& c, permit_replies& st, std::vector<std::string>& others);
    void judge_permit(const round_ctx& c, const acquire_ptr& hp, permit_replies& st);
    void check_permit_latch(const round_ctx& c, const acquire_ptr& hp, std::shared_ptr<permit_replies> st);
    void check_lease_owner(const round_ctx& c, const acquire_ptr& hp);
    void grant_permit(const round_ctx& c, const acquire_ptr& hp);
    void drop_permit(const round_ctx& c, const acquire_ptr& hp, error_code ec);
    void permit_freed(const key_pair& key, std::uint64_t epoch);
    // A node that must go while the session lives (our `locks` node once a permit is held):
    // deleted, and asked again while the connection is lost.
    void remove_until_gone(const std::string& node, std::int64_t sid);
    void release_lease(const lease_key& k, const release_ptr& hp, bool again);
    void semaphore_status(const std::string& name, std::function<void(error_code, lock_status, std::string)> done);
    void force_release_permits(const std::string& name, const release_ptr& hp);
    // Deletes `children` of `path` at once: true if any was deleted (force release).
    void remove_nodes(const std::string& path, const std::vector<std::string>& children, const release_ptr& hp);

    // Untokened watchers of a name: one children watch, re-armed on each change.
    struct name_watch {
        std::vector<std::string> last;
        std::uint64_t epoch = 0;
        std::string leader_watched;  // an election's leader node whose data is watched
    };
    std::map<std::string, name_watch> names;
    std::uint64_t name_epochs = 0;  // the last epoch given to any name's watch

    // ---- count-down latches (latch.cpp) ----
    struct latch_op {
        std::string name, member;
        std::uint64_t count = 0;
        milliseconds ttl{0};
        int rounds = 0;
        bool parents_made = false;
        dlock::detail::stored_handler<count_down_signature> h;
    };
    struct latch_replies;
    // The servers' time (ms) from the mtime of a write of ours, and when it was heard.
    std::optional<std::pair<std::int64_t, clock_type::time_point>> server_time;
    bool ttl_nodes = true;  // until the servers refuse TTL nodes (extendedTypesEnabled off)
    static std::optional<lease_kind> other_kind(const std::vector<std::string>& children,
                                                const std::vector<std::string>& locks,
                                                const std::vector<std::string>& leases);
    std::string clock_path() const;
    std::string latch_path(const std::string& name) const;
    void count_down(std::shared_ptr<latch_op> op);
    void judge_count_down(std::shared_ptr<latch_op> op, latch_replies& st);
    void remove_expired(std::shared_ptr<latch_op> op, int version);
    void create_latch(std::shared_ptr<latch_op> op, const std::string& data, std::uint64_t remaining);
    void check_new_latch(std::shared_ptr<latch_op> op, std::uint64_t remaining);
    void make_clock(std::function<void(int)> done);
    void latch_done(const std::shared_ptr<latch_op>& op, error_code ec, std::uint64_t remaining);
    void note_server_time(std::int64_t mtime);
    std::int64_t estimated_server_time() const;  // 0: no write of ours heard yet
    // Whether a name's latch node keeps another kind out: alive, or not a latch's (expired: deleted).
    void latch_in_use(const std::string& name, std::int64_t now, std::function<void(bool)> done);
    void read_latch(const std::string& name, boost::asio::any_completion_handler<latch_state_signature> h);

    void arm_name(const std::string& name);
    void watch_leader_value(const std::string& name, const std::string& node);
    void on_children(const std::string& name, int rc, std::vector<std::string> children);
};

}  // namespace dlock
