// SPDX-License-Identifier: BSL-1.0
// memcached's acquire as a machine (src/memcached/acquire_steps.hpp), fed scripted replies:
// every step against every reply kind it can get, the bytes each step sends, the race limit.
#include <dlock/error.hpp>

#include "memcached/acquire_steps.hpp"
#include "scripted_replies.hpp"

#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

using namespace std::chrono_literals;
namespace proto = dlock::memcached::proto;
using dlock::error;
using dlock::memcached::acquire_steps;
using proto::reply;
using step = acquire_steps::step;
using replies = std::vector<reply>;

namespace {

using memcached_script::keys;
using memcached_script::of;

// The lock item as `mg <lock> v c t` returns it.
reply item(const std::string& owner, std::uint64_t fence, long long cas = 42, long long ttl_s = 6)
{
    auto r = memcached_script::item(owner, fence, cas);
    r.flags.emplace_back('t', std::to_string(ttl_s));
    return r;
}
const reply hd = of(reply::kind::hd), ns = of(reply::kind::ns), ex = of(reply::kind::ex), nf = of(reply::kind::nf),
            en = of(reply::kind::en);

acquire_steps machine()
{
    return acquire_steps(keys(), "tok", 5000ms);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(memcached_acquire_steps)

// The fence is drawn only once the item is ours: added with fence 0, then set by CAS.
BOOST_AUTO_TEST_CASE(a_free_name_is_added_then_takes_a_fence)
{
    auto m = machine();
    BOOST_TEST((m.current() == step::read));
    BOOST_TEST(m.bytes() == "mg ns:lock:job v c t\r\n");
    BOOST_TEST((m.on_replies({en}) == step::add));
    BOOST_TEST(m.replies() == 2u);
    BOOST_TEST(m.bytes() == "ms ns:lock:job 5 T6 ME c\r\ntok 0\r\nmd ns:contended:job\r\n");
    auto added = hd;
    added.flags.emplace_back('c', "77");
    BOOST_TEST((m.on_replies({added, nf}) == step::next_fence));
    BOOST_TEST(m.bytes() == "ma ns:fence:job N0 J1 v\r\n");
    BOOST_TEST((m.on_replies({of(reply::kind::va, "7")}) == step::set_fence));
    BOOST_TEST(m.bytes() == "ms ns:lock:job 5 T6 C77\r\ntok 7\r\n");
    BOOST_TEST((m.on_replies({hd}) == step::done));
    BOOST_TEST(!m.error());
    BOOST_TEST(m.result().acquired);
    BOOST_TEST(m.result().fencing_token == 7u);
    BOOST_TEST(m.result().granted_ttl == 5000ms);
}

// Our item read back with fence 0 (the round that added it lost its reply or stopped): the
// fence is drawn and set on it now.
BOOST_AUTO_TEST_CASE(ours_without_a_fence_yet_takes_one)
{
    auto m = machine();
    BOOST_TEST((m.on_replies({item("tok", 0, 555)}) == step::next_fence));
    BOOST_TEST((m.on_replies({of(reply::kind::va, "12")}) == step::set_fence));
    BOOST_TEST(m.bytes() == "ms ns:lock:job 6 T6 C555\r\ntok 12\r\n");
    BOOST_TEST((m.on_replies({hd}) == step::done));
    BOOST_TEST(m.result().fencing_token == 12u);
    // Another's item being taken (fence 0) is held: contended.
    auto other = machine();
    BOOST_TEST((other.on_replies({item("other", 0)}) == step::mark_contended));
}

// A failure once our item is added, before its fence is set, deletes the item by its CAS
// first (it would block the name for a whole TTL), then reports the failure.
BOOST_AUTO_TEST_CASE(a_failure_after_the_add_withdraws_the_item)
{
    auto added = hd;
    added.flags.emplace_back('c', "31");
    auto m = machine();
    m.on_replies({en});
    m.on_replies({added, nf});
    BOOST_TEST((m.on_replies({of(reply::kind::client_error, {}, "non-numeric value")}) == step::withdraw));
    BOOST_TEST(m.bytes() == "md ns:lock:job C31\r\n");
    BOOST_TEST((m.on_replies({hd}) == step::done));
    BOOST_TEST((m.error() == error::invalid_request));
    BOOST_TEST(m.text() == "non-numeric value");
    BOOST_TEST(!m.result().acquired);
    m = machine();  // the same at the CAS set, whatever the delete answers
    m.on_replies({en});
    m.on_replies({added, nf});
    m.on_replies({of(reply::kind::va, "4")});
    BOOST_TEST((m.on_replies({of(reply::kind::server_error, {}, "out of memory")}) == step::withdraw));
    BOOST_TEST((m.on_replies({nf}) == step::done));
    BOOST_TEST((m.error() == error::server_busy));
}

BOOST_AUTO_TEST_CASE(ours_already_is_refreshed_by_cas_with_the_same_fence)
{
    auto m = machine();
    BOOST_TEST((m.on_replies({item("tok", 9, 1234)}) == step::refresh));
    BOOST_TEST(m.bytes() == "ms ns:lock:job 5 T6 C1234\r\ntok 9\r\n");
    BOOST_TEST((m.on_replies({hd}) == step::done));
    BOOST_TEST(m.result().acquired);
    BOOST_TEST(m.result().fencing_token == 9u);
}

BOOST_AUTO_TEST_CASE(held_by_another_marks_it_contended_and_reports_the_holders_lease)
{
    auto m = machine();
    BOOST_TEST((m.on_replies({item("other", 3, 1, 4)}) == step::mark_contended));
    BOOST_TEST(m.bytes() == "ms ns:contended:job 1 T6\r\n1\r\n");
    BOOST_TEST((m.on_replies({hd}) == step::done));
    BOOST_TEST(!m.error());
    BOOST_TEST(!m.result().acquired);
    BOOST_TEST(m.result().holder_ttl == 3000ms);  // 4 s as memcached counts, less the extra second
}

BOOST_AUTO_TEST_CASE(a_lost_race_reads_again_for_add_set_fence_and_refresh)
{
    auto added = hd;
    added.flags.emplace_back('c', "5");
    for (const auto& lost : {ns, ex, nf}) {
        auto m = machine();
        m.on_replies({en});
        m.on_replies({added, hd});
        m.on_replies({of(reply::kind::va, "3")});
        BOOST_TEST((m.on_replies({lost}) == step::read));  // our item expired and changed hands
        m.on_replies({en});
        BOOST_TEST((m.on_replies({lost, hd}) == step::read));  // added by another first
        BOOST_TEST((m.on_replies({item("tok", 2)}) == step::refresh));
        BOOST_TEST((m.on_replies({lost}) == step::read));  // changed under us
        BOOST_TEST(!m.error());
    }
}

BOOST_AUTO_TEST_CASE(races_in_a_row_end_with_server_busy)
{
    auto m = machine();
    int rounds = 0;
    while (m.current() != step::done && rounds < 100) {
        m.on_replies({item("tok", 2)});
        m.on_replies({ex});
        ++rounds;
    }
    BOOST_TEST(rounds == acquire_steps::max_races);
    BOOST_TEST((m.error() == error::server_busy));
    BOOST_TEST(m.text() == "dlock: 8 races in a row on ns:lock:job");
    BOOST_TEST(!m.result().acquired);
}

BOOST_AUTO_TEST_CASE(error_replies_fail_every_step_with_the_servers_words)
{
    auto server = of(reply::kind::server_error, {}, "out of memory");
    auto client = of(reply::kind::client_error, {}, "bad command line format");
    // Each step reached, then answered with each error reply.
    auto at = [](step s) {
        auto m = machine();
        auto added = hd;
        added.flags.emplace_back('c', "5");
        if (s == step::add || s == step::next_fence || s == step::set_fence)
            m.on_replies({en});
        if (s == step::next_fence || s == step::set_fence)
            m.on_replies({added, hd});
        if (s == step::set_fence)
            m.on_replies({of(reply::kind::va, "1")});
        if (s == step::refresh)
            m.on_replies({item("tok", 1)});
        if (s == step::mark_contended)
            m.on_replies({item("other", 1)});
        BOOST_TEST_REQUIRE((m.current() == s));
        return m;
    };
    for (auto s : {step::read, step::add, step::next_fence, step::set_fence, step::refresh, step::mark_contended}) {
        auto m = at(s);
        m.on_replies(s == step::add ? replies{hd, server} : replies{server});
        BOOST_TEST((m.error() == error::server_busy));
        BOOST_TEST(m.text() == "out of memory");
        m = at(s);
        m.on_replies(s == step::add ? replies{client, hd} : replies{client});
        BOOST_TEST((m.error() == error::invalid_request));
        m = at(s);
        m.on_replies(s == step::add ? replies{of(reply::kind::error), hd} : replies{of(reply::kind::error)});
        BOOST_TEST((m.error() == error::protocol_error));
        BOOST_TEST(m.text().find("does not speak the meta protocol") != std::string::npos);
        BOOST_TEST(!m.result().acquired);
    }
}

BOOST_AUTO_TEST_CASE(what_is_not_a_lock_or_a_counter_is_refused)
{
    auto m = machine();
    m.on_replies({of(reply::kind::va, "no-fence-here")});  // another program wrote the key
    BOOST_TEST((m.error() == error::invalid_request));
    BOOST_TEST(m.text() == "dlock: the key ns:lock:job holds something that is not a dlock lock");
    m = machine();
    auto added = hd;
    added.flags.emplace_back('c', "5");
    m.on_replies({en});
    m.on_replies({added, hd});
    m.on_replies({of(reply::kind::va, "0")});  // a counter starts at 1
    BOOST_TEST((m.error() == error::invalid_request));
    m = machine();
    m.on_replies({en});
    m.on_replies({hd, hd});  // an add whose reply carries no CAS (a server without the c flag)
    BOOST_TEST((m.error() == error::protocol_error));
    m = machine();
    m.on_replies({hd, hd});  // the wrong number of replies
    BOOST_TEST((m.error() == error::protocol_error));
    BOOST_TEST((m.on_replies({en}) == step::done));  // done stays done
}

BOOST_AUTO_TEST_SUITE_END()
