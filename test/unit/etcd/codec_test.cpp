// SPDX-License-Identifier: BSL-1.0
// The etcd gateway codec fed by hand: request bodies, replies as the 3.4 gateway writes
// them (int64 as strings, zero fields omitted, bytes in base64), errors, and bad input.
#include <dlock/error.hpp>
#include <dlock/etcd/config.hpp>

#include "etcd/codec.hpp"
#include "etcd/latch_codec.hpp"
#include "unit/print.hpp"

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

using namespace dlock::etcd::detail;
using dlock::error;
namespace json = boost::json;

namespace {

std::string b64(std::string_view s)
{
    return base64_encode(s);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(etcd_codec)

BOOST_AUTO_TEST_CASE(base64_round_trips_every_length_and_refuses_junk)
{
    std::string all;
    for (int i = 0; i < 256; ++i)
        all += static_cast<char>(i);
    for (std::size_t n = 0; n <= all.size(); n += 1) {
        std::string back;
        BOOST_TEST_REQUIRE(base64_decode(base64_encode(all.substr(0, n)), back));
        BOOST_TEST(back == all.substr(0, n));
    }
    BOOST_TEST(base64_encode("foo") == "Zm9v");
    BOOST_TEST(base64_encode("fo") == "Zm8=");
    std::string out;
    BOOST_TEST(!base64_decode("Zm9", out));       // length
    BOOST_TEST(!base64_decode("Zm9*", out));      // alphabet
    BOOST_TEST(!base64_decode("Z===", out));      // too much padding
    BOOST_TEST(!base64_decode("Zm=v", out));      // padding inside
    BOOST_TEST(!base64_decode("Zm8=Zm8=", out));  // padding before the end
}

BOOST_AUTO_TEST_CASE(prefix_end_and_key_layout_follow_etcd)
{
    BOOST_TEST(prefix_end("a/") == "a0");  // '/' + 1
    BOOST_TEST(prefix_end(std::string("a\xff", 2)) == "b");
    BOOST_TEST(prefix_end(std::string("\xff\xff", 2)) == std::string(1, '\0'));
    BOOST_TEST(lock_key("job/", 0x694d7f1a2b3c4d5eLL) == "job/694d7f1a2b3c4d5e");  // Mutex: pfx + %x of the lease
}

BOOST_AUTO_TEST_CASE(queued_acquire_is_etcd_mutex_lock)
{
    auto body = queued_acquire_txn("job/1f", "job/", "tok", 31);
    auto v = json::parse(body).as_object();
    auto& cmp = v.at("compare").as_array().at(0).as_object();
    BOOST_TEST(cmp.at("target").as_string() == "CREATE");
    BOOST_TEST(cmp.at("key").as_string() == b64("job/1f"));
    BOOST_TEST(cmp.at("create_revision").as_string() == "0");
    auto& put = v.at("success").as_array().at(0).as_object().at("request_put").as_object();
    BOOST_TEST(put.at("value").as_string() == b64("tok"));
    BOOST_TEST(put.at("lease").as_string() == "31");
    auto& owner = v.at("success").as_array().at(1).as_object().at("request_range").as_object();
    BOOST_TEST(owner.at("range_end").as_string() == b64("job0"));
    BOOST_TEST(owner.at("sort_target").as_string() == "CREATE");
    BOOST_TEST(owner.at("sort_order").as_string() == "ASCEND");
    BOOST_TEST(owner.at("limit").as_string() == "1");
    BOOST_TEST(v.at("failure").as_array().size() == 2u);
    // The unqueued attempt puts only into an empty range.
    auto t = json::parse(try_acquire_txn("job/1f", "job/", "tok", 31)).as_object();
    BOOST_TEST(t.at("compare").as_array().at(0).as_object().at("range_end").as_string() == b64("job0"));
    BOOST_TEST(t.at("success").as_array().size() == 1u);
}

BOOST_AUTO_TEST_CASE(acquire_replies)
{
    acquire_reply a;
    reply_error err;
    // Put, and the first key is ours.
    std::string won = R"({"header":{"revision":"42"},"succeeded":true,"responses":[{"response_put":{"header":{}}},)"
                      R"({"response_range":{"kvs":[{"key":")" +
                      b64("job/1f") + R"(","create_revision":"42","mod_revision":"42","version":"1","value":")" +
                      b64("tok") + R"(","lease":"31"}],"count":"1"}}]})";
    BOOST_TEST_REQUIRE(parse_acquire(won, true, "job/1f", "tok", 31, a, err));
    BOOST_TEST(a.put);
    BOOST_TEST(a.mine->create_revision == 42);
    BOOST_TEST(a.owner->key == "job/1f");
    // Not put (ours exists: a retry), and the first key is another's: queued.
    std::string queued = R"({"header":{"revision":"50"},"responses":[{"response_range":{"kvs":[{"key":")" +
                         b64("job/1f") + R"(","create_revision":"44","value":")" + b64("tok") +
                         R"("}],"count":"1"}},{"response_range":{"kvs":[{"key":")" + b64("job/2a") +
                         R"(","create_revision":"40"}],"count":"2"}}]})";
    BOOST_TEST_REQUIRE(parse_acquire(queued, true, "job/1f", "tok", 31, a, err));
    BOOST_TEST(!a.put);
    BOOST_TEST(a.mine->create_revision == 44);
    BOOST_TEST(a.owner->key == "job/2a");
    BOOST_TEST(a.owner->value.empty());  // etcdctl's keys have no value: omitted
    // Unqueued, range not empty, ours absent: an empty first range.
    std::string busy = R"({"header":{"revision":"51"},"responses":[{"response_range":{"header":{}}},)"
                       R"({"response_range":{"kvs":[{"key":")" +
                       b64("job/2a") + R"(","create_revision":"40"}],"count":"1"}}]})";
    BOOST_TEST_REQUIRE(parse_acquire(busy, false, "job/1f", "tok", 31, a, err));
    BOOST_TEST(!a.mine);
    BOOST_TEST(a.owner->create_revision == 40);
    // Shapes that are not a Txn reply.
    BOOST_TEST(!parse_acquire(R"({"header":{"revision":"5"}})", true, "k", "t", 1, a, err));
    BOOST_TEST(err.code == error::protocol_error);
    BOOST_TEST(!parse_acquire("[1]", true, "k", "t", 1, a, err));
    BOOST_TEST(
        !parse_acquire(R"({"responses":[{"response_range":{"kvs":[{"key":"***"}]}}]})", false, "k", "t", 1, a, err));
}

// A semaphore's attempt reads the first N keys; its value says how many permits it is under.
BOOST_AUTO_TEST_CASE(semaphore_keys_and_values)
{
    auto body = json::parse(queued_acquire_txn("pool/1f", "pool/", "v", 31, 3)).as_object();
    BOOST_TEST(
        body.at("success").as_array().at(1).as_object().at("request_range").as_object().at("limit").as_string() == "3");
    acquire_reply a;
    reply_error err;
    std::string two = R"({"header":{"revision":"60"},"responses":[{"response_range":{"kvs":[{"key":")" +
                      b64("pool/1f") + R"(","create_revision":"44","value":")" + b64("v") +
                      R"("}],"count":"1"}},{"response_range":{"kvs":[{"key":")" + b64("pool/2a") +
                      R"(","create_revision":"40"},{"key":")" + b64("pool/1f") +
                      R"(","create_revision":"44"}],"count":"3"}}]})";
    BOOST_TEST_REQUIRE(parse_acquire(two, true, "pool/1f", "v", 31, a, err));
    BOOST_TEST(a.firsts.size() == 2u);
    BOOST_TEST(a.owner->key == "pool/2a");
    BOOST_TEST(a.firsts[1].key == "pool/1f");
    BOOST_TEST(permit_value("tok", 3) == "dlock-semaphore/3/tok");
    BOOST_TEST(permits_in(permit_value("tok", 3)).value_or(0) == 3u);
    for (auto v : {"", "tok", "dlock-semaphore/", "dlock-semaphore/3", "dlock-semaphore/x/t", "dlock-semaphore/0/t"})
        BOOST_TEST(!permits_in(v), v);
    // A release reports a holder among the first N, not only the first.
    bool deleted = false, held = false;
    std::string rel = R"({"succeeded":true,"responses":[{"response_range":{"kvs":[{"key":")" + b64("pool/2a") +
                      R"(","create_revision":"40"},{"key":")" + b64("pool/1f") +
                      R"(","create_revision":"44"}]}},{"response_delete_range":{"deleted":"1"}}]})";
    BOOST_TEST_REQUIRE(parse_release(rel, "pool/1f", deleted, held, err));
    BOOST_TEST(deleted);
    BOOST_TEST(held);
    BOOST_TEST_REQUIRE(parse_release(rel, "pool/99", deleted, held, err));
    BOOST_TEST(!held);
}

// A latch's count-down puts the latch key every time (its waiters hear a new value); a new
// latch needs the whole range empty, an existing one its latch key unchanged.
BOOST_AUTO_TEST_CASE(latch_keys_and_count_down)
{
    BOOST_TEST(is_latch_key("job/", "job/latch"));
    BOOST_TEST(is_latch_key("job/", "job/member/a"));
    BOOST_TEST(!is_latch_key("job/", "job/694d"));
    BOOST_TEST(!is_latch_key("job/", "other/latch"));
    BOOST_TEST(latch_count_in(latch_value(4)).value_or(0) == 4u);
    BOOST_TEST(!latch_count_in("dlock-latch/0"));
    auto fresh = json::parse(latch_count_down_txn("job/", 0, 4, "a", 7)).as_object();
    auto cmp = fresh.at("compare").as_array().at(0).as_object();
    BOOST_TEST(cmp.contains("range_end"));  // the whole range, not only the latch key
    BOOST_TEST(fresh.at("success").as_array().size() == 3u);
    auto again = json::parse(latch_count_down_txn("job/", 9, 4, "a", 7)).as_object();
    auto cmp2 = again.at("compare").as_array().at(0).as_object();
    BOOST_TEST(!cmp2.contains("range_end"));
    BOOST_TEST(cmp2.at("create_revision").as_string() == "9");
    BOOST_TEST(again.at("success").as_array().size() == 3u);  // the latch key put again, with the member
}

BOOST_AUTO_TEST_CASE(confirm_release_predecessor_and_range)
{
    confirm_reply c;
    reply_error err;
    BOOST_TEST_REQUIRE(
        parse_confirm(R"({"header":{},"succeeded":true,"responses":[{"response_range":{"count":"3"}}]})", c, err));
    BOOST_TEST(c.owned);
    BOOST_TEST(c.count == 3);
    BOOST_TEST_REQUIRE(parse_confirm(R"({"header":{"revision":"9"}})", c, err));
    BOOST_TEST(!c.owned);
    auto conf = json::parse(confirm_txn({"job/1f", 0, "tok"}, "job/")).as_object();
    BOOST_TEST(conf.at("compare").as_array().at(0).as_object().at("target").as_string() == "VALUE");
    // Once its create revision is known, our key is known by it (a leader rewrites its value).
    auto by_rev = json::parse(confirm_txn({"job/1f", 7, "tok"}, "job/")).as_object();
    auto cmp = by_rev.at("compare").as_array().at(0).as_object();
    BOOST_TEST(cmp.at("target").as_string() == "CREATE");
    BOOST_TEST(cmp.at("create_revision").as_string() == "7");
    auto rel = json::parse(release_txn({"job/1f", 7, ""}, "job/")).as_object();
    BOOST_TEST(rel.at("compare").as_array().at(0).as_object().at("target").as_string() == "CREATE");
    auto rel_v = json::parse(release_txn({"job/1f", 0, ""}, "job/")).as_object();
    BOOST_TEST(rel_v.at("compare").as_array().at(0).as_object().at("value").as_string() == "");
    BOOST_TEST(
        conf.at("success").as_array().at(0).as_object().at("request_range").as_object().at("count_only").as_bool());

    bool deleted = false, held = false;
    auto first = [](std::string k) {
        return R"({"succeeded":true,"responses":[{"response_range":{"kvs":[{"key":")" + base64_encode(k) +
               R"(","create_revision":"3"}]}},{"response_delete_range":{"deleted":"1"}}]})";
    };
    BOOST_TEST_REQUIRE(parse_release(first("job/1f"), "job/1f", deleted, held, err));
    BOOST_TEST((deleted && held));
    BOOST_TEST_REQUIRE(parse_release(first("job/0a"), "job/1f", deleted, held, err));
    BOOST_TEST((deleted && !held));  // a queued key, withdrawn
    BOOST_TEST_REQUIRE(parse_release(R"({"header":{}})", "job/1f", deleted, held, err));
    BOOST_TEST((!deleted && !held));
    bool ok = false;
    BOOST_TEST_REQUIRE(parse_succeeded(R"({"succeeded":true})", ok, err));
    BOOST_TEST(ok);
    BOOST_TEST_REQUIRE(parse_succeeded(R"({"header":{}})", ok, err));
    BOOST_TEST(!ok);

    auto pred = json::parse(predecessor_txn("job/1f", 44, "job/")).as_object();
    auto& r = pred.at("success").as_array().at(0).as_object().at("request_range").as_object();
    BOOST_TEST(r.at("max_create_revision").as_string() == "43");
    BOOST_TEST(r.at("sort_order").as_string() == "DESCEND");
    predecessor_reply p;
    BOOST_TEST_REQUIRE(parse_predecessor(R"({"header":{"revision":"60"},"succeeded":true,"responses":[)"
                                         R"({"response_range":{"header":{}}}]})",
                                         p, err));
    BOOST_TEST(p.mine_exists);
    BOOST_TEST(!p.predecessor);  // nobody before us: ours
    BOOST_TEST(p.revision == 60);
    BOOST_TEST_REQUIRE(parse_predecessor(R"({"header":{"revision":"61"}})", p, err));
    BOOST_TEST(!p.mine_exists);

    range_reply rr;
    BOOST_TEST_REQUIRE(parse_range(R"({"header":{"revision":"7"}})", rr, err));
    BOOST_TEST(rr.count == 0);
    BOOST_TEST(rr.kvs.empty());
    BOOST_TEST(!parse_range(R"({"kvs":{}})", rr, err));
}

BOOST_AUTO_TEST_CASE(leases)
{
    lease_reply l;
    reply_error err;
    BOOST_TEST_REQUIRE(parse_lease(R"({"header":{},"ID":"7587862072984044811","TTL":"5"})", l, err));
    BOOST_TEST(l.id == 7587862072984044811LL);
    BOOST_TEST(l.ttl == 5);
    // The keep-alive's stream message; a lease that is gone has no TTL.
    BOOST_TEST_REQUIRE(parse_lease("{\"result\":{\"header\":{},\"ID\":\"12\",\"TTL\":\"3\"}}\n", l, err));
    BOOST_TEST(l.ttl == 3);
    BOOST_TEST_REQUIRE(parse_lease(R"({"result":{"header":{},"ID":"12"}})", l, err));
    BOOST_TEST(l.ttl == 0);
    BOOST_TEST(json::parse(grant_request(5)).at("TTL").as_string() == "5");
    BOOST_TEST(json::parse(lease_id_request(12)).at("ID").as_string() == "12");
    BOOST_TEST(!parse_lease(R"({"ID":"12","TTL":"three"})", l, err));
    BOOST_TEST(err.code == error::protocol_error);
}

BOOST_AUTO_TEST_CASE(watch_messages)
{
    watch_message m;
    reply_error err;
    BOOST_TEST_REQUIRE(parse_watch_message(R"({"result":{"header":{"revision":"9"},"created":true}})", m, err));
    BOOST_TEST(m.created);
    BOOST_TEST(m.revision == 9);
    auto del = R"({"result":{"header":{"revision":"11"},"events":[{"type":"DELETE","kv":{"key":")" + b64("job/2a") +
               R"(","mod_revision":"11"}}]}})";
    BOOST_TEST_REQUIRE(parse_watch_message(del, m, err));
    BOOST_TEST(m.deleted.size() == 1u);
    BOOST_TEST(m.deleted[0].key == "job/2a");
    // A put (type omitted: PUT is the zero value) is not a deletion.
    auto put = R"({"result":{"header":{"revision":"12"},"events":[{"kv":{"key":")" + b64("job/3") + R"("}}]}})";
    BOOST_TEST_REQUIRE(parse_watch_message(put, m, err));
    BOOST_TEST(m.deleted.empty());
    BOOST_TEST_REQUIRE(parse_watch_message(
        R"({"result":{"header":{"revision":"20"},"canceled":true,"compact_revision":"15"}})", m, err));
    BOOST_TEST(m.canceled);
    BOOST_TEST(m.compact_revision == 15);
    BOOST_TEST(m.rewritten.empty());  // a new key (its mod revision is its create revision)
    // A key put again (a leader's proclaimed value) is a rewrite.
    auto again = R"({"result":{"header":{"revision":"13"},"events":[{"kv":{"key":")" + b64("job/3") +
                 R"(","create_revision":"9","mod_revision":"13","value":")" + b64("v2") + R"("}}]}})";
    BOOST_TEST_REQUIRE(parse_watch_message(again, m, err));
    BOOST_TEST_REQUIRE(m.rewritten.size() == 1u);
    BOOST_TEST(m.rewritten[0].value == "v2");
    BOOST_TEST(m.deleted.empty());
    auto create = json::parse(watch_create_request("job/", "job0", 10)).at("create_request").as_object();
    BOOST_TEST(create.at("start_revision").as_string() == "10");
    BOOST_TEST(create.at("filters").as_array().at(0).as_string() == "NOPUT");
    auto with_puts = json::parse(watch_create_request("job/", "job0", 10, true)).at("create_request").as_object();
    BOOST_TEST(!with_puts.contains("filters"));
    BOOST_TEST(!parse_watch_message("{\"result\":", m, err));
    BOOST_TEST(!parse_watch_message(R"({"result":{"events":[{"type":"DELETE"}]}})", m, err));
}

// Election.Proclaim: the value goes in, with the lease, only into the key created at `created`.
BOOST_AUTO_TEST_CASE(proclaim_writes_only_the_key_it_put)
{
    auto t = json::parse(proclaim_txn("job/1f", 42, "leader-a", 0x1f)).as_object();
    auto cmp = t.at("compare").as_array().at(0).as_object();
    BOOST_TEST(cmp.at("target").as_string() == "CREATE");
    BOOST_TEST(cmp.at("result").as_string() == "EQUAL");
    BOOST_TEST(cmp.at("create_revision").as_string() == "42");
    BOOST_TEST(cmp.at("key").as_string() == base64_encode("job/1f"));
    auto put = t.at("success").as_array().at(0).as_object().at("request_put").as_object();
    BOOST_TEST(put.at("value").as_string() == base64_encode("leader-a"));
    BOOST_TEST(put.at("lease").as_string() == "31");
    BOOST_TEST(!t.contains("failure"));
    bool written = true;
    reply_error err;
    BOOST_TEST_REQUIRE(parse_succeeded(R"({"header":{"revision":"50"}})", written, err));
    BOOST_TEST(!written);  // a deposed leader: its key is gone or another's
}

BOOST_AUTO_TEST_CASE(errors_are_classified)
{
    auto e = classify(503, R"({"error":"etcdserver: no leader","code":14,"message":"etcdserver: no leader"})");
    BOOST_TEST(e.code == error::server_busy);
    BOOST_TEST(dlock::is_transient(e.code));
    BOOST_TEST(e.text == "etcdserver: no leader");
    BOOST_TEST(classify(500, R"({"code":7,"message":"etcdserver: permission denied"})").code ==
               error::permission_denied);
    BOOST_TEST(classify(500, R"({"code":16,"message":"etcdserver: invalid auth token"})").code == error::auth_failed);
    BOOST_TEST(classify(500, R"({"code":5,"message":"etcdserver: requested lease not found"})").code ==
               error::session_lost);
    BOOST_TEST(classify(400, R"({"code":3,"message":"etcdserver: key is not provided"})").code ==
               error::invalid_request);
    // Issue 29: a request over the server's size limits (a 1 MiB name) is permanent, not a
    // busy server: as etcd answers it past its gRPC limit and past --max-request-bytes.
    auto big = classify(429, R"j({"error":"grpc: received message larger than max (3145799 vs. 2097152)",)j"
                             R"j("message":"grpc: received message larger than max (3145799 vs. 2097152)","code":8})j");
    BOOST_TEST(big.code == error::invalid_request);
    BOOST_TEST(!dlock::is_transient(big.code));
    BOOST_TEST(big.text.find("max-request-bytes") != std::string::npos, big.text);
    auto large = classify(400, R"({"error":"etcdserver: request is too large","code":3})");
    BOOST_TEST(large.code == error::invalid_request);
    BOOST_TEST(large.text.find("lock name") != std::string::npos, large.text);
    BOOST_TEST(classify(429, R"({"code":8,"message":"etcdserver: too many requests"})").code == error::server_busy);
    // A timetolive reply: the lease's full TTL too (a live lease may have 0 whole seconds left).
    lease_reply lr;
    reply_error lerr;
    BOOST_TEST(parse_lease(R"({"header":{},"ID":"7","TTL":"0","grantedTTL":"1"})", lr, lerr));
    BOOST_TEST(lr.ttl == 0);
    BOOST_TEST(lr.granted_ttl == 1);
    // Not an etcd gateway: an HTML page, or a 404 from another HTTP server.
    auto other = classify(404, "404 page not found");
    BOOST_TEST(other.code == error::protocol_error);
    BOOST_TEST(other.text.find("etcd gateway") != std::string::npos);
    // A 200 whose body is an error still fails the parse with its code.
    acquire_reply a;
    reply_error err;
    BOOST_TEST(!parse_acquire(R"({"error":"etcdserver: request timed out","code":14})", true, "k", "t", 1, a, err));
    BOOST_TEST(err.code == error::server_busy);
}

BOOST_AUTO_TEST_CASE(urls)
{
    dlock::etcd::config c;
    dlock::etcd::config_error err;
    BOOST_TEST_REQUIRE(
        dlock::etcd::parse_url("etcd://127.0.0.1:23790,[::1]:23791,h3/locks/?lease=5s&timeout=2s", c, err));
    BOOST_TEST(c.endpoints.size() == 3u);
    BOOST_TEST(c.endpoints[1].host == "::1");
    BOOST_TEST(c.endpoints[1].port == 23791);
    BOOST_TEST(c.endpoints[2].port == 2379);
    BOOST_TEST(c.prefix == "locks/");
    BOOST_TEST(c.lease_ttl.count() == 5);
    BOOST_TEST(c.request_timeout.count() == 2000);
    BOOST_TEST(dlock::etcd::to_url(c) == "etcd://127.0.0.1:23790,[::1]:23791,h3:2379/locks/");
    struct bad {
        const char* url;
        error code;
    };
    for (auto [url, code] :
         {bad{"redis://h", error::unsupported_scheme}, bad{"h:1", error::invalid_url},
          bad{"etcd://", error::invalid_url}, bad{"etcd://h:0", error::invalid_port},
          bad{"etcd://h:99999", error::invalid_port}, bad{"etcd://h:x", error::invalid_port},
          bad{"etcd://h,", error::invalid_url}, bad{"etcd://u:p@h", error::invalid_url},
          bad{"etcd://h?lease=1500ms", error::invalid_lease}, bad{"etcd://h?lease=soon", error::invalid_duration},
          bad{"etcd://h?colour=red", error::invalid_option}, bad{"etcd://h?lease", error::invalid_option}}) {
        dlock::etcd::config out;
        BOOST_TEST(!dlock::etcd::parse_url(url, out, err), url);
        BOOST_TEST(err.code == code, url << ": " << err.message);
        BOOST_TEST(!err.message.empty());
    }
}

BOOST_AUTO_TEST_SUITE_END()
