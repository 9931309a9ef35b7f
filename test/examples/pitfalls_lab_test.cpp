// SPDX-License-Identifier: BSL-1.0
// The pitfalls lab as a user runs it, with --json: dlock's row is clean under every fault,
// and each flawed recipe fails the way its write-up warns. The lab time-boxes its own rows;
// reading its output is bounded here too.
#include "common/child.hpp"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <map>
#include <string>

using namespace std::chrono_literals;

namespace {

const std::string setnx_expire = "setnx+expire", timestamps = "setnx/getset timestamps",
                  del_no_owner = "SET NX PX, DEL without owner check",
                  fixed_lease = "SET NX PX, fixed lease, no renewal", polling = "100 ms polling", dlock_row = "dlock";

std::int64_t num(const boost::json::object& row, const char* field)
{
    return row.at(field).to_number<std::int64_t>();
}

bool flag(const boost::json::object& row, const char* field)
{
    return row.at(field).as_bool();
}

}  // namespace

BOOST_AUTO_TEST_CASE(pitfalls_lab_shows_each_failure_and_dlock_none)
{
    dlock::test::child lab({DLOCK_PITFALLS_LAB, "--json"});
    std::map<std::string, boost::json::object> rows;
    const auto deadline = std::chrono::steady_clock::now() + 160s;
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        auto line = lab.read_line(std::max(left, std::chrono::milliseconds(0)));
        if (!line)
            break;
        BOOST_TEST_MESSAGE(*line);
        boost::system::error_code ec;
        auto v = boost::json::parse(*line, ec);
        BOOST_REQUIRE_MESSAGE(!ec && v.is_object(), "not a JSON object: " << *line);
        rows[std::string(v.as_object().at("recipe").as_string())] = v.as_object();
    }
    BOOST_TEST(lab.wait(10s) == 0);
    BOOST_REQUIRE_EQUAL(rows.size(), 6u);
    for (const auto& [name, row] : rows) {
        BOOST_TEST_CONTEXT(name)
        {
            BOOST_TEST(num(row, "hung_workers") == 0);
            BOOST_TEST(num(row, "failed_workers") == 0);
        }
    }

    // dlock: no two holders at once, no lost update, nothing stuck, under all the faults.
    const auto& d = rows.at(dlock_row);
    BOOST_TEST(num(d, "sections") > 0);
    BOOST_TEST(num(d, "overlaps") == 0);
    BOOST_TEST(num(d, "lost_updates") == 0);
    BOOST_TEST(num(d, "stuck") == 0);
    BOOST_TEST(flag(d, "killed"));
    BOOST_TEST(flag(d, "slow"));
    BOOST_TEST(flag(d, "paused"));

    // SETNX then EXPIRE: a holder killed between the two leaves a lock nobody gets again.
    BOOST_TEST(flag(rows.at(setnx_expire), "killed"));
    BOOST_TEST(num(rows.at(setnx_expire), "stuck") >= 1);

    // Skewed timestamps, a DEL that frees another's lock, a lease shorter than the work.
    for (const auto* name : {&timestamps, &del_no_owner, &fixed_lease}) {
        const auto& row = rows.at(*name);
        BOOST_TEST_CONTEXT(*name)
        {
            BOOST_TEST((num(row, "overlaps") >= 1 || num(row, "lost_updates") >= 1));
        }
    }

    // Polling costs commands: more per section than dlock's notifications and hand-offs.
    const auto& p = rows.at(polling);
    BOOST_REQUIRE(p.at("commands_per_section").is_number());
    BOOST_REQUIRE(d.at("commands_per_section").is_number());
    BOOST_TEST(p.at("commands_per_section").to_number<double>() > d.at("commands_per_section").to_number<double>());
}
