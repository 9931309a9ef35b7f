// SPDX-License-Identifier: BSL-1.0
// memcached's renewal and release as a machine (src/memcached/owner_steps.hpp), fed scripted
// replies: each step against each reply kind, the bytes of each step, the race limit.
#include <dlock/error.hpp>

#include "memcached/owner_steps.hpp"
#include "scripted_replies.hpp"

#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

using namespace std::chrono_literals;
namespace proto = dlock::memcached::proto;
using dlock::error;
using dlock::memcached::owner_steps;
using proto::reply;
using step = owner_steps::step;
using op = owner_steps::op;

namespace {

using memcached_script::item;
using memcached_script::keys;
using memcached_script::of;
const reply hd = of(reply::kind::hd), ex = of(reply::kind::ex), nf = of(reply::kind::nf), en = of(reply::kind::en);

owner_steps renewal()
{
    return owner_steps(op::renew, keys(), "tok", 5000ms);
}
owner_steps release()
{
    return owner_steps(op::release, keys(), "tok");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(memcached_owner_steps)

BOOST_AUTO_TEST_CASE(a_renewal_rewrites_our_item_by_cas_and_reads_the_contended_mark)
{
    auto m = renewal();
    BOOST_TEST(m.bytes() == "mg ns:lock:job v c\r\n");
    BOOST_TEST((m.on_replies({item("tok", 7, 99)}) == step::write));
    BOOST_TEST(m.replies() == 2u);
    BOOST_TEST(m.bytes() == "ms ns:lock:job 5 T6 C99\r\ntok 7\r\nmd ns:contended:job\r\n");
    BOOST_TEST((m.on_replies({hd, hd}) == step::done));
    BOOST_TEST(m.owned());
    BOOST_TEST(m.contended());  // the mark was there: someone asked for the name
    m = renewal();
    m.on_replies({item("tok", 7)});
    m.on_replies({hd, nf});
    BOOST_TEST(m.owned());
    BOOST_TEST(!m.contended());
}

BOOST_AUTO_TEST_CASE(a_release_deletes_only_the_item_it_read)
{
    auto m = release();
    BOOST_TEST((m.on_replies({item("tok", 7, 1234)}) == step::write));
    BOOST_TEST(m.replies() == 1u);
    BOOST_TEST(m.bytes() == "md ns:lock:job C1234\r\n");
    BOOST_TEST((m.on_replies({hd}) == step::done));
    BOOST_TEST(m.owned());
    m = release();
    m.on_replies({item("tok", 7)});
    m.on_replies({nf});  // expired between the read and the delete
    BOOST_TEST(!m.owned());
    BOOST_TEST(!m.error());
}

BOOST_AUTO_TEST_CASE(absent_or_anothers_is_not_owned_and_changes_nothing)
{
    for (auto make : {renewal, release}) {
        auto m = make();
        BOOST_TEST((m.on_replies({en}) == step::done));
        BOOST_TEST(!m.owned());
        BOOST_TEST(!m.error());
        m = make();
        BOOST_TEST((m.on_replies({item("other", 3)}) == step::done));
        BOOST_TEST(!m.owned());
    }
}

BOOST_AUTO_TEST_CASE(a_changed_item_is_read_again_up_to_the_race_limit)
{
    for (auto make : {renewal, release}) {
        auto m = make();
        int rounds = 0;
        while (m.current() != step::done && rounds < 100) {
            m.on_replies({item("tok", 2)});
            m.on_replies(m.replies() == 2 ? std::vector<reply>{ex, nf} : std::vector<reply>{ex});
            ++rounds;
        }
        BOOST_TEST(rounds == owner_steps::max_races);
        BOOST_TEST((m.error() == error::server_busy));
        BOOST_TEST(m.text() == "dlock: 8 races in a row on ns:lock:job");
        BOOST_TEST(!m.owned());
    }
}

BOOST_AUTO_TEST_CASE(errors_fail_each_step_with_the_servers_words)
{
    for (auto make : {renewal, release}) {
        auto m = make();
        m.on_replies({of(reply::kind::server_error, {}, "out of memory")});
        BOOST_TEST((m.error() == error::server_busy));
        BOOST_TEST(m.text() == "out of memory");
        m = make();
        m.on_replies({item("tok", 1)});
        m.on_replies(m.replies() == 2 ? std::vector<reply>{hd, of(reply::kind::client_error, {}, "bad data chunk")}
                                      : std::vector<reply>{of(reply::kind::client_error, {}, "bad data chunk")});
        BOOST_TEST((m.error() == error::invalid_request));
        BOOST_TEST(m.text() == "bad data chunk");
        BOOST_TEST(!m.owned());
        m = make();
        auto garbage = of(reply::kind::va);
        garbage.data = "not-a-lock";
        m.on_replies({garbage});
        BOOST_TEST((m.error() == error::invalid_request));
        BOOST_TEST(m.text() == "dlock: the key ns:lock:job holds something that is not a dlock lock");
        m = make();
        m.on_replies({of(reply::kind::error)});
        BOOST_TEST((m.error() == error::protocol_error));
        m = make();
        m.on_replies({hd, hd});  // the wrong number of replies for a read
        BOOST_TEST((m.error() == error::protocol_error));
        BOOST_TEST((m.on_replies({en}) == step::done));
    }
}

BOOST_AUTO_TEST_SUITE_END()
