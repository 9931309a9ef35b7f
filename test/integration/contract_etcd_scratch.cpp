#include <dlock/etcd/store.hpp>
#include "integration/contract_subject.hpp"
#include <cstdlib>
namespace dlock::test {
contract_subject make_contract_subject(boost::asio::io_context& io)
{
    dlock::etcd::config cfg; dlock::etcd::config_error err;
    if (!dlock::etcd::parse_url(std::getenv("ETCD_URL"), cfg, err)) throw std::runtime_error(err.message);
    auto st = std::make_unique<dlock::etcd_store>(io.get_executor(), cfg);
    auto* raw = st.get();
    return {nullptr, std::move(st), [raw] { raw->close(); }};
}
}
