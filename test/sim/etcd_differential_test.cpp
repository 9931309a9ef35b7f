// SPDX-License-Identifier: BSL-1.0
// The etcd model against a real etcd: the transactions etcd_store sends (src/etcd/codec.cpp:
// the Lock transaction, the try, confirm, release, the predecessor read) in one random
// sequence on three keys of one lease, sent to a real member and applied to etcd_model;
// every answer must agree, create revisions included.
#include "common/etcd_cluster.hpp"
#include "etcd/codec.hpp"
#include "etcd_model.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/test/unit_test.hpp>

#include <random>

namespace asio = boost::asio;
namespace http = boost::beast::http;
namespace codec = dlock::etcd::detail;
using namespace std::chrono_literals;

namespace {

// One blocking HTTP connection to the member's JSON gateway.
class gateway {
public:
    explicit gateway(std::uint16_t port) : socket_(io_)
    {
        socket_.connect({asio::ip::make_address("127.0.0.1"), port});
        host_ = "127.0.0.1:" + std::to_string(port);
    }
    std::string post(std::string_view path, std::string body)
    {
        http::request<http::string_body> req{http::verb::post, std::string(path), 11};
        req.set(http::field::host, host_);
        req.set(http::field::content_type, "application/json");
        req.body() = std::move(body);
        req.prepare_payload();
        http::write(socket_, req);
        http::response<http::string_body> res;
        http::read(socket_, buffer_, res);
        BOOST_TEST_REQUIRE(res.result_int() == 200u, res.body());
        return res.body();
    }

private:
    asio::io_context io_;
    asio::ip::tcp::socket socket_;
    boost::beast::flat_buffer buffer_;
    std::string host_;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(simulation_differential)

BOOST_AUTO_TEST_CASE(the_etcd_model_answers_as_etcd_does)
{
    dlock::test::etcd_cluster cluster(1);
    gateway g(cluster.client_port(0));
    dlock::sim::world w(1);
    dlock::sim::etcd_model model(w);
    codec::reply_error err;
    codec::lease_reply lease;
    BOOST_TEST_REQUIRE(codec::parse_lease(g.post(codec::grant_path, codec::grant_request(600)), lease, err), err.text);
    auto mine_lease = model.grant(600s);
    const std::string range = "n/";
    std::vector<std::string> keys, tokens;
    std::vector<std::int64_t> created(3, 0);  // the create revision each key was read with
    for (int i = 0; i < 3; ++i) {
        keys.push_back(codec::lock_key(range, lease.id) + "-" + std::to_string(i));
        tokens.push_back("t" + std::to_string(i));
    }
    // The model's keys carry the model's lease; its answers name keys as etcd's do.
    std::mt19937 rng(20261128);
    for (int step = 0; step < 300; ++step) {
        auto i = rng() % 3;
        const auto& key = keys[i];
        const auto& token = tokens[i];
        switch (rng() % 4) {
        case 0: {
            bool queued = rng() % 2 == 0;
            auto body = queued ? codec::queued_acquire_txn(key, range, token, lease.id)
                               : codec::try_acquire_txn(key, range, token, lease.id);
            codec::acquire_reply real;
            BOOST_TEST_REQUIRE(
                codec::parse_acquire(g.post(codec::txn_path, body), queued, key, token, lease.id, real, err), err.text);
            auto m = model.acquire(key, token, mine_lease, queued);
            BOOST_TEST(real.mine.has_value() == m.mine.has_value(), "step " << step);
            if (real.mine && m.mine) {
                BOOST_TEST(real.mine->create_revision == m.mine->create, "step " << step);
                created[i] = m.mine->create;
            }
            BOOST_TEST(real.owner.has_value() == m.owner.has_value(), "step " << step);
            if (real.owner && m.owner)
                BOOST_TEST(real.owner->key == m.owner->key, "step " << step);
            break;
        }
        case 1: {
            codec::confirm_reply real;
            BOOST_TEST_REQUIRE(
                codec::parse_confirm(g.post(codec::txn_path, codec::confirm_txn({key, created[i], token}, range)), real,
                                     err),
                err.text);
            auto m = model.confirm(key, created[i], token);
            BOOST_TEST(real.owned == m.owned, "step " << step);
            if (real.owned && m.owned)
                BOOST_TEST(static_cast<std::size_t>(real.count) == m.count, "step " << step);
            break;
        }
        case 2: {
            bool deleted = false, held = false;
            BOOST_TEST_REQUIRE(
                codec::parse_release(g.post(codec::txn_path, codec::release_txn({key, created[i], token}, range)), key,
                                     deleted, held, err),
                err.text);
            auto [m_deleted, m_held] = model.release(key, created[i], token);
            BOOST_TEST(deleted == m_deleted, "step " << step);
            BOOST_TEST(held == m_held, "step " << step);
            break;
        }
        default: {
            // The recipe reads its place only with its key's create revision known (etcd
            // takes an absent key's create revision as 0, so 0 would match nothing useful).
            if (created[i] == 0)
                break;
            codec::predecessor_reply real;
            BOOST_TEST_REQUIRE(codec::parse_predecessor(
                                   g.post(codec::txn_path, codec::predecessor_txn(key, created[i], range)), real, err),
                               err.text);
            auto m = model.predecessor(key, created[i]);
            BOOST_TEST(real.mine_exists == m.mine_exists, "step " << step);
            BOOST_TEST(real.predecessor.has_value() == m.predecessor.has_value(), "step " << step);
            if (real.predecessor && m.predecessor)
                BOOST_TEST(real.predecessor->key == *m.predecessor, "step " << step);
        }
        }
    }
}

BOOST_AUTO_TEST_SUITE_END()
