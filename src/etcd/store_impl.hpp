// SPDX-License-Identifier: BSL-1.0
// etcd_store's state and the driver's steps, one file per topic: the lease that carries
// every lock of the store (session.cpp), an acquire and a release (acquire.cpp), a queued
// token's wait for its predecessor's key (queue.cpp), a name's untokened watch
// (name_watch.cpp), status and elections (status.cpp), the contract's entry points (store.cpp). The kit gives the
// session's life, the watch table and the acquire/release order.
#pragma once

#include <dlock/error.hpp>
#include <dlock/etcd/store.hpp>

#include "common/backoff.hpp"
#include "common/post_completion.hpp"
#include "common/predecessor_wait.hpp"
#include "common/session_store_state.hpp"
#include "etcd/codec.hpp"
#include "etcd/http_pool.hpp"
#include "etcd/key_slots.hpp"
#include "etcd/watch_stream.hpp"

#include <boost/asio/steady_timer.hpp>

#include <map>
#include <optional>
#include <random>

namespace dlock {

struct etcd_store::impl : dlock::detail::session_store_state<etcd::config, etcd_store::error_text_keeper>,
                          std::enable_shared_from_this<impl> {
    using acquire_handler = boost::asio::any_completion_handler<acquire_signature>;
    using release_handler = boost::asio::any_completion_handler<bool_signature>;

    impl(boost::asio::any_io_executor e, etcd::config c, error_text_keeper keep)
        : session_store_state(e, std::move(c), std::move(keep)), pool(e, cfg), keepalive_timer(e), deadline_timer(e)
    {
    }

    etcd::detail::http_pool pool;
    bool probed = false;  // the gateway answered as etcd once
    std::minstd_rand rng{std::random_device{}()};

    // ---- the session: one etcd lease (session.cpp; life and gate in the kit's state) ----
    std::int64_t lease = 0;  // 0: none (life.id() as etcd numbers it)
    boost::asio::steady_timer keepalive_timer, deadline_timer;

    void ensure_session(std::int64_t want_s, std::function<void(error_code)> cont);
    void probe(std::int64_t want_s, bool again = false);
    void grant(std::int64_t want_s);
    void arm_keepalive();
    void arm_deadline();
    void keepalive();
    void session_gone(std::string why);

    // ---- keys, acquires and releases (acquire.cpp) ----
    etcd::detail::key_slots slots;

    std::string range_of(const std::string& name) const { return cfg.prefix + name + "/"; }
    // A read-write lock's keys are under `<range>read/` or `<range>write/` (etcd's contrib RWMutex).
    std::string slot_key(const std::string& name, std::size_t slot, lease_kind kind = lease_kind::mutex) const;
    std::string key_for(const std::string& name, const std::string& token,
                        lease_kind kind = lease_kind::mutex) const;  // empty: none
    std::string assign_key(const std::string& name, const std::string& token, lease_kind kind = lease_kind::mutex);
    // The value an acquire puts: a mutex's token; nothing for an election's candidate (its
    // value comes with proclaim, and etcd's observers read the value of the first key).
    static std::string_view first_value(lease_kind kind, const std::string& token);
    // Our key as the renewals and releases of `k` compare it (`key`: its name; both must
    // outlive the result).
    etcd::detail::our_key our_key_of(const lease_key& k, const std::string& key) const;
    void acquire(const lease_request& req, acquire_handler h, bool retried);
    void send_acquire(const lease_request& req, acquire_handler h, bool retried);
    void acquired(const lease_request& req, acquire_handler h, error_code ec, acquire_result res);
    void release(const lease_key& k, release_handler h, bool again = false);
    void release_later(const lease_key& k, release_handler h);

    // ---- watches (the table in the kit's state): queued tokens (queue.cpp), names (name_watch.cpp) ----
    // A queued token waiting for its predecessor's key to go: the kit's machine decides
    // (common/predecessor_wait.hpp), queue.cpp reads, watches and tells.
    struct queued {
        explicit queued(boost::asio::any_io_executor ex, std::minstd_rand& rng) : wait(&rng), retry(ex) {}
        std::string name, token, key, prefix;
        std::int64_t mine = 0;                // our key's create_revision
        milliseconds ttl{0};                  // the lease the attempt asked for
        clock_type::time_point first_send{};  // the first queued attempt's send time
        dlock::detail::predecessor_wait wait;
        std::shared_ptr<etcd::detail::watch_stream> stream;
        boost::asio::steady_timer retry;
    };
    using queued_ptr = std::shared_ptr<queued>;
    dlock::detail::wait_queue<queued> queue{[this](const queued_ptr& q, auto& a) { perform(q, a); }};

    // `prefix`: the keys it waits behind (the name's range; a reader: its writers').
    void start_queued(const std::string& name, const std::string& token, const etcd::detail::key_value& mine,
                      clock_type::time_point sent, milliseconds ttl, const std::string& prefix);
    void perform(const queued_ptr& q, const dlock::detail::wait_action& a);
    void check_place(const queued_ptr& q);
    void watch_predecessor(const queued_ptr& q, const std::string& pred);

    // ---- semaphores (permit.cpp): every permit a key of the name's range, the first N by
    // creation hold; a waiter re-reads at every deletion in the range ----
    struct permit_entry {
        unsigned permits = 0;
        std::string value;  // what the token put: compared by releases before its creation is known
    };
    std::map<key_pair, permit_entry> permit_values;
    std::map<key_pair, std::shared_ptr<etcd::detail::watch_stream>> permit_waits;

    void on_lock_reply(const lease_request& req, const etcd::detail::acquire_reply& a, const std::string& key,
                       std::int64_t l, clock_type::time_point sent, const std::string& value, acquire_handler h);
    void on_permit_reply(const lease_request& req, const etcd::detail::acquire_reply& a, const std::string& key,
                         std::int64_t l, clock_type::time_point sent, acquire_handler h);
    // Deletes the key an attempt put (if still the one created at `created`), then completes it with `ec`.
    void withdraw_key(const lease_request& req, const std::string& key, std::int64_t created, error_code ec,
                      acquire_handler h);
    void delete_later(const std::string& key, std::int64_t created);
    void start_permit_wait(const std::string& name, const std::string& token, std::int64_t revision);
    void on_permit_message(const key_pair& k, error_code ec, const etcd::detail::watch_message& m);
    void stop_permit_wait(const key_pair& k);
    void stop_permit_waits(bool tell);
    static std::vector<etcd::detail::key_value> holders_of(std::string_view range,
                                                           std::vector<etcd::detail::key_value> kvs);
    void delete_holders(std::vector<etcd::detail::key_value> kvs,
                        boost::asio::any_completion_handler<bool_signature> h);

    // What a name's first key says it is, as kind_mismatch's text (a read-write lock's key; a
    // permit's, a latch's or a lock's value); `range` is the name's.
    static std::string kind_text_of(const etcd::detail::key_value& first, std::string_view range);
    // A mutex's or an election candidate's key (etcdctl's too): none of the others.
    static bool is_lock_key(const etcd::detail::key_value& first, std::string_view range);

    // ---- read-write locks (rw.cpp): etcd's contrib RWMutex layout ----
    void send_rw_acquire(const lease_request& req, acquire_handler h, bool retried, const std::string& key);
    void on_rw_reply(const lease_request& req, const etcd::detail::acquire_reply& a,
                     const std::optional<etcd::detail::key_value>& first_writer, const std::string& key, std::int64_t l,
                     clock_type::time_point sent, acquire_handler h);

    // ---- count-down latches (latch.cpp; the keys in latch_codec.hpp) ----
    struct latch_op {
        std::string name, member, range;
        std::uint64_t count = 0;
        milliseconds ttl{0};
        int rounds = 0;
        std::shared_ptr<boost::asio::any_completion_handler<latch_capability::count_down_signature>> h;
    };
    using latch_op_ptr = std::shared_ptr<latch_op>;
    void count_down_round(const latch_op_ptr& op);
    void put_member(const latch_op_ptr& op, std::int64_t created, std::int64_t lease, bool granted);
    void keep_latch(const latch_op_ptr& op, std::int64_t lease, std::function<void()> then);
    void touch_latch(const latch_op_ptr& op, std::int64_t created, std::int64_t lease);
    void latch_done(const latch_op_ptr& op, error_code ec, std::uint64_t remaining);

    // Untokened watchers of a name share one stream of deletions under it.
    struct name_stream {
        std::shared_ptr<etcd::detail::watch_stream> stream;
        std::shared_ptr<boost::asio::steady_timer> retry;
        std::int64_t next_rev = 0;
        bool created = false;
        dlock::detail::backoff pause{milliseconds(20), milliseconds(1000)};
    };
    std::map<std::string, name_stream> names;

    void start_name_stream(const std::string& name);
    void on_name_message(const std::string& name, error_code ec, const etcd::detail::watch_message& m);
    void stop_name_stream(const std::string& name);

    // ---- what a name holds (status.cpp): status, and with `with_value` an election's leader ----
    void answer_status(const std::string& name, boost::asio::any_completion_handler<status_signature> h,
                       bool with_value);

    // ---- replies (store.cpp) ----
    // A reply's status and body: the error if it failed.
    error_code reply_failed(error_code ec, const etcd::detail::http_reply& r, etcd::detail::reply_error& err);
    // A reply through `parse(body, err)`: the transport's, the server's or the parser's error.
    template <class Parse>
    error_code decode(error_code ec, const etcd::detail::http_reply& r, Parse parse, etcd::detail::reply_error& err)
    {
        ec = reply_failed(ec, r, err);
        if (!ec && !parse(r.body, err)) {
            set_text(err.text);
            ec = err.code;
        }
        return ec;
    }
    template <class F>
    void request(std::string_view path, std::string body, F f, milliseconds timeout = milliseconds(0),
                 bool urgent = false, bool idempotent = true)
    {
        pool.post(
            path, std::move(body),
            [self = shared_from_this(), f = std::move(f)](error_code ec, etcd::detail::http_reply r) mutable {
                f(ec, std::move(r));
            },
            timeout, urgent, idempotent);
    }
};

}  // namespace dlock
