// SPDX-License-Identifier: BSL-1.0
// The no-scripting recipe without a server: what each read decides, and how EXEC's reply
// (committed, or nil on a WATCH conflict) becomes the contract's result.
#include <dlock/error.hpp>

#include "redis/tx_recipe.hpp"

#include <boost/test/unit_test.hpp>

using namespace std::chrono_literals;
namespace tx = dlock::redis::tx;
using dlock::redis::reply;
using dlock::redis::reply_type;
using dlock::redis::response;

namespace {

reply ok()
{
    return reply{reply_type::status, 0, "OK", {}};
}
reply queued()
{
    return reply{reply_type::status, 0, "QUEUED", {}};
}
reply nil()
{
    return reply{};
}
reply str(std::string s)
{
    return reply{reply_type::string, 0, std::move(s), {}};
}
reply num(long long v)
{
    return reply{reply_type::integer, v, {}, {}};
}
reply arr(std::vector<reply> e)
{
    return reply{reply_type::array, 0, {}, std::move(e)};
}
reply err(std::string s)
{
    return reply{reply_type::error, 0, std::move(s), {}};
}

const tx::names k{"{a}dlock:lock:n", "{a}dlock:fence", "{a}dlock:released:n", "{a}dlock:queue:n"};

// The replies of read_acquire: owner, fence, contended, set (a read-write lock's or a
// semaphore's mark); PTTL; the counter.
response acquire_reads(reply owner, reply fence, reply contended, long long pttl, reply counter, reply set = nil())
{
    return {ok(),       ok(), arr({std::move(owner), std::move(fence), std::move(contended), std::move(set)}),
            num(pttl), std::move(counter)};
}

// MULTI's OK, n QUEUED, then EXEC's reply.
response written(std::size_t n, reply exec)
{
    response r{ok()};
    for (std::size_t i = 0; i < n; ++i)
        r.push_back(queued());
    r.push_back(std::move(exec));
    return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(tx_recipe)

BOOST_AUTO_TEST_CASE(read_acquire_watches_the_lock_and_the_counter)
{
    auto r = tx::read_acquire(k);
    BOOST_TEST(r.size() == 5u);
    BOOST_TEST(r.payload().find("UNWATCH") != std::string::npos);
    BOOST_TEST(r.payload().find("$5\r\nWATCH\r\n$15\r\n{a}dlock:lock:n\r\n$14\r\n{a}dlock:fence") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(free_name_takes_counter_plus_one)
{
    auto p = tx::plan_acquire(acquire_reads(nil(), nil(), nil(), -2, str("41")), k, "me", 5s);
    BOOST_TEST(!p.ec);
    BOOST_TEST(!p.done);
    BOOST_TEST(p.new_fence == 42);
    BOOST_TEST(p.write.size() == 5u);  // MULTI INCR HSET PEXPIRE EXEC
    BOOST_TEST(p.write.payload().find("$7\r\nPEXPIRE\r\n$15\r\n{a}dlock:lock:n\r\n$4\r\n5000") != std::string::npos);
    dlock::acquire_result out;
    boost::system::error_code ec;
    BOOST_TEST((tx::finish_acquire(written(3, arr({num(42), num(2), num(1)})), p, out, ec) == tx::outcome::committed));
    BOOST_TEST(out.acquired);
    BOOST_TEST(out.fencing_token == 42u);
    BOOST_TEST(out.granted_ttl == 5000ms);
    // A conflict: EXEC is nil, nothing is reported.
    dlock::acquire_result none;
    BOOST_TEST((tx::finish_acquire(written(3, nil()), p, none, ec) == tx::outcome::conflict));
    BOOST_TEST(!none.acquired);
    // An INCR that does not give counter + 1 under WATCH is not believed.
    BOOST_TEST((tx::finish_acquire(written(3, arr({num(50), num(2), num(1)})), p, none, ec) == tx::outcome::failed));
    BOOST_TEST(ec == dlock::error::protocol_error);
}

// A name a read-write lock or a semaphore holds or queues for is marked in the lock hash:
// refused with kind_mismatch, nothing written, and the text names what it is.
BOOST_AUTO_TEST_CASE(a_name_marked_as_another_kind_is_refused)
{
    auto rw = tx::plan_acquire(acquire_reads(nil(), nil(), nil(), 800, str("3"), str("0")), k, "me", 5s);
    BOOST_TEST(rw.ec == dlock::error::kind_mismatch);
    BOOST_TEST(rw.write.size() == 0u);
    BOOST_TEST(rw.why == "dlock: the name is in use as a read-write lock");
    auto sem = tx::plan_acquire(acquire_reads(nil(), nil(), nil(), 800, str("3"), str("4")), k, "me", 5s);
    BOOST_TEST(sem.ec == dlock::error::kind_mismatch);
    BOOST_TEST(sem.why == "dlock: the name is in use as a semaphore of 4 permits");
    auto bad = tx::plan_acquire(acquire_reads(nil(), nil(), nil(), 800, str("3"), str("x")), k, "me", 5s);
    BOOST_TEST(bad.ec == dlock::error::invalid_request);
}

BOOST_AUTO_TEST_CASE(no_counter_yet_starts_at_one)
{
    auto p = tx::plan_acquire(acquire_reads(nil(), nil(), nil(), -2, nil()), k, "me", 5s);
    BOOST_TEST(p.new_fence == 1);
}

BOOST_AUTO_TEST_CASE(own_lease_is_refreshed_with_its_fence)
{
    auto p = tx::plan_acquire(acquire_reads(str("me"), str("7"), nil(), 3000, str("9")), k, "me", 5s);
    BOOST_TEST(!p.done);
    BOOST_TEST(p.new_fence == 0);
    BOOST_TEST(p.write.size() == 3u);  // MULTI PEXPIRE EXEC
    dlock::acquire_result out;
    boost::system::error_code ec;
    BOOST_TEST((tx::finish_acquire(written(1, arr({num(1)})), p, out, ec) == tx::outcome::committed));
    BOOST_TEST(out.acquired);
    BOOST_TEST(out.fencing_token == 7u);
}

BOOST_AUTO_TEST_CASE(taken_name_marks_contended_once_and_reports_pttl)
{
    auto p = tx::plan_acquire(acquire_reads(str("other"), str("7"), nil(), 4200, str("9")), k, "me", 5s);
    BOOST_TEST(!p.done);
    BOOST_TEST(p.write.payload().find("contended") != std::string::npos);
    dlock::acquire_result out;
    boost::system::error_code ec;
    BOOST_TEST((tx::finish_acquire(written(1, arr({num(1)})), p, out, ec) == tx::outcome::committed));
    BOOST_TEST(!out.acquired);
    BOOST_TEST(out.holder_ttl == 4200ms);
    // Already marked: nothing to write.
    auto q = tx::plan_acquire(acquire_reads(str("other"), str("7"), str("1"), 4200, str("9")), k, "me", 5s);
    BOOST_TEST(q.done);
    BOOST_TEST(!q.result.acquired);
    BOOST_TEST(q.result.holder_ttl == 4200ms);
}

BOOST_AUTO_TEST_CASE(bad_reads_are_errors)
{
    BOOST_TEST(tx::plan_acquire({ok()}, k, "me", 5s).ec == dlock::error::invalid_request);
    BOOST_TEST(tx::plan_acquire(acquire_reads(nil(), nil(), nil(), -2, str("x1")), k, "me", 5s).ec ==
               dlock::error::invalid_request);
    BOOST_TEST(tx::plan_acquire(acquire_reads(str("me"), str("0"), nil(), 100, str("1")), k, "me", 5s).ec ==
               dlock::error::protocol_error);
    BOOST_TEST(tx::plan_renew({ok(), ok(), str("x")}, k, "me", 5s).ec == dlock::error::invalid_request);
}

BOOST_AUTO_TEST_CASE(renew_only_our_own_and_report_contention)
{
    auto not_ours = tx::plan_renew({ok(), ok(), arr({str("other"), nil()})}, k, "me", 5s);
    BOOST_TEST(not_ours.done);
    BOOST_TEST(!not_ours.result.owned);
    auto gone = tx::plan_renew({ok(), ok(), arr({nil(), nil()})}, k, "me", 5s);
    BOOST_TEST(gone.done);
    BOOST_TEST(!gone.result.owned);
    auto ours = tx::plan_renew({ok(), ok(), arr({str("me"), str("1")})}, k, "me", 5s);
    BOOST_TEST(!ours.done);
    dlock::renew_result out;
    boost::system::error_code ec;
    BOOST_TEST((tx::finish_renew(written(2, arr({num(1), num(1)})), out, ec) == tx::outcome::committed));
    BOOST_TEST(out.owned);
    BOOST_TEST(out.contended);
    BOOST_TEST((tx::finish_renew(written(2, arr({num(1), num(0)})), out, ec) == tx::outcome::committed));
    BOOST_TEST(!out.contended);
    BOOST_TEST((tx::finish_renew(written(2, nil()), out, ec) == tx::outcome::conflict));
}

BOOST_AUTO_TEST_CASE(release_only_our_own_and_publish)
{
    auto not_ours = tx::plan_release({ok(), ok(), arr({str("other"), nil()})}, k, "me");
    BOOST_TEST(not_ours.done);
    BOOST_TEST(!not_ours.result);
    auto ours = tx::plan_release({ok(), ok(), arr({str("me"), nil()})}, k, "me");
    BOOST_TEST(!ours.done);
    BOOST_TEST(ours.write.payload().find("PUBLISH") != std::string::npos);
    BOOST_TEST(ours.write.payload().find("released") != std::string::npos);
    bool out = false;
    boost::system::error_code ec;
    BOOST_TEST((tx::finish_release(written(2, arr({num(1), num(0)})), out, ec) == tx::outcome::committed));
    BOOST_TEST(out);
    BOOST_TEST((tx::finish_release(written(2, nil()), out, ec) == tx::outcome::conflict));
}

BOOST_AUTO_TEST_CASE(status_and_force_release_decode)
{
    dlock::lock_status st;
    BOOST_TEST(!tx::decode_status(written(4, arr({arr({str("me"), str("7")}), num(1234), str("9"), num(0)})), st));
    BOOST_TEST(st.held);
    BOOST_TEST(st.holder == "me");
    BOOST_TEST(st.fencing_token == 7u);
    BOOST_TEST(st.last_fencing_token == 9u);
    BOOST_TEST(st.ttl == 1234ms);
    BOOST_TEST(!tx::decode_status(written(4, arr({arr({nil(), nil()}), num(-2), nil(), num(0)})), st));
    BOOST_TEST(!st.held);
    BOOST_TEST(st.ttl == -1ms);
    bool freed = false;
    BOOST_TEST(!tx::decode_force_release(written(2, arr({num(1), num(0)})), freed));
    BOOST_TEST(freed);
    BOOST_TEST(!tx::decode_force_release(written(2, arr({num(0), num(0)})), freed));
    BOOST_TEST(!freed);
    BOOST_TEST(tx::decode_force_release({ok()}, freed) == dlock::error::invalid_request);
    // The lease's fields go, not the hash: a read-write lock's or a semaphore's mark stays.
    auto force = tx::force_release(k).payload();
    BOOST_TEST(force.find("HDEL") != std::string::npos);
    BOOST_TEST(force.find("UNLINK") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(first_error_finds_the_refused_command)
{
    response r{ok(), err("NOPERM this user has no permissions to run the 'hset' command"),
               err("EXECABORT Transaction discarded because of previous errors.")};
    BOOST_TEST(tx::first_error(r).rfind("NOPERM", 0) == 0u);
    response inside{ok(), queued(), arr({err("WRONGTYPE Operation against a key")})};
    BOOST_TEST(tx::first_error(inside).rfind("WRONGTYPE", 0) == 0u);
    BOOST_TEST(tx::first_error({ok()}).empty());
}

BOOST_AUTO_TEST_SUITE_END()
