// SPDX-License-Identifier: BSL-1.0
// The ZooKeeper model against a real ZooKeeper server: one random sequence of ephemeral
// sequential creates (Curator's node names), deletes, children reads and node reads, sent
// through the store's own client (src/zookeeper/client.hpp) and applied to zk_model; the
// names (their sequence numbers), the children, each node's owner and whether each delete
// found its node must agree.
#include "common/zk_ensemble.hpp"
#include "zk_model.hpp"
#include "zookeeper/client.hpp"
#include "zookeeper/recipe.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <random>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using dlock::zookeeper::detail::client;
using dlock::zookeeper::detail::node_stat;

namespace {

// Runs the io_context until `done` (bounded: 20 s).
template <class Done>
bool run_until(asio::io_context& io, Done done)
{
    auto end = std::chrono::steady_clock::now() + 20s;
    while (!done() && std::chrono::steady_clock::now() < end) {
        io.restart();
        io.run_for(5ms);
    }
    return done();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(simulation_differential)

BOOST_AUTO_TEST_CASE(the_zookeeper_model_answers_as_zookeeper_does)
{
    dlock::test::zk_ensemble z(1);
    asio::io_context io;
    std::string err;
    int state = 0;
    auto zk = client::open(
        io.get_executor(), z.connect_string(), 10s, [&](int s) { state = s; }, err);
    BOOST_TEST_REQUIRE(zk, err);
    BOOST_TEST_REQUIRE(run_until(io, [&] { return state == ZOO_CONNECTED_STATE; }));
    const std::string path = "/diff";
    int rc = -1;
    zk->create(path, "", 0, [&](int r, std::string, node_stat) { rc = r; });
    BOOST_TEST_REQUIRE(run_until(io, [&] { return rc != -1; }));
    BOOST_TEST_REQUIRE(rc == ZOK);

    dlock::sim::world w(1);
    dlock::sim::zk_model model(w);
    auto real_session = zk->session_id();
    auto model_session = model.open_session(10s);
    std::mt19937 rng(20261128);
    std::vector<std::string> made;  // names created so far (some deleted since)
    int steps = 0;
    for (int step = 0; step < 300; ++step) {
        switch (rng() % 4) {
        case 0:
        case 1: {
            auto token = "t" + std::to_string(rng() % 5);
            auto prefix = dlock::zookeeper::recipe::node_prefix(token, real_session);
            std::string name;
            rc = -1;
            zk->create(path + "/" + prefix, token, ZOO_EPHEMERAL_SEQUENTIAL, [&](int r, std::string p, node_stat) {
                rc = r;
                name = p.substr(p.rfind('/') + 1);
            });
            BOOST_TEST_REQUIRE(run_until(io, [&] { return rc != -1; }));
            BOOST_TEST_REQUIRE(rc == ZOK);
            auto mine = model.create(prefix, token, model_session);
            BOOST_TEST_REQUIRE(mine.has_value());
            BOOST_TEST(name == mine->first, "step " << step << ": " << name << " vs " << mine->first);
            made.push_back(name);
            break;
        }
        case 2: {
            if (made.empty())
                break;
            auto name = made[rng() % made.size()];
            rc = -1;
            zk->remove(path + "/" + name, [&](int r) { rc = r; });
            BOOST_TEST_REQUIRE(run_until(io, [&] { return rc != -1; }));
            BOOST_TEST((rc == ZOK) == model.remove(name), "step " << step << ": delete " << name);
            break;
        }
        default: {
            std::vector<std::string> children;
            rc = -1;
            zk->get_children(path, [&](int r, std::vector<std::string> c) {
                rc = r;
                children = std::move(c);
            });
            BOOST_TEST_REQUIRE(run_until(io, [&] { return rc != -1; }));
            std::sort(children.begin(), children.end());
            BOOST_TEST((children == model.children()), "step " << step);
            for (auto& name : children) {
                node_stat st;
                rc = -1;
                zk->exists(path + "/" + name, [&](int r, node_stat s) {
                    rc = r;
                    st = s;
                });
                BOOST_TEST_REQUIRE(run_until(io, [&] { return rc != -1; }));
                auto n = model.get(name);
                BOOST_TEST_REQUIRE(n.has_value());
                BOOST_TEST((st.ephemeral_owner == real_session) == (n->owner == model_session), "step " << step);
            }
        }
        }
        ++steps;
    }
    BOOST_TEST(steps == 300);
    zk->close();
}

BOOST_AUTO_TEST_SUITE_END()
