// SPDX-License-Identifier: BSL-1.0
#include "memcached_recipe.hpp"

namespace dlock::sim {

using boost::system::error_code;
namespace proto = memcached::proto;

memcached_recipe::memcached_recipe(process& p, memcached_model& srv) : p_(p), srv_(srv) {}

memcached::name_keys memcached_recipe::keys()
{
    memcached::name_keys k;
    k.lock_text = "dlock:lock:x";
    k.lock = proto::encode_key(k.lock_text);
    k.fence = proto::encode_key("dlock:fence:x");
    k.contended = proto::encode_key("dlock:contended:x");
    return k;
}

template <class Steps>
void memcached_recipe::run(std::shared_ptr<Steps> s, std::function<void(error_code)> done)
{
    auto bytes = s->bytes();
    p_.request(
        [&srv = srv_, &w = p_.w(), bytes, s, done, this]() -> std::function<void()> {
            auto replies = srv.execute(bytes, w.now());
            return [this, s, done, replies] {
                if (s->on_replies(replies) == Steps::step::done)
                    return done({});
                run(s, done);
            };
        },
        done);
}

void memcached_recipe::attempt(const detail::fsm_action& a)
{
    auto s = std::make_shared<memcached::acquire_steps>(keys(), a.token, p_.shared().cfg.lease);
    run(s, [this, s](error_code ec) {
        p_.fsm().on_attempt_done(ec ? ec : s->error(), ec ? acquire_result{} : s->result(), p_.local_now());
        p_.step();
    });
}

void memcached_recipe::renew(const detail::fsm_action& a)
{
    auto s = std::make_shared<memcached::owner_steps>(memcached::owner_steps::op::renew, keys(), a.token,
                                                      p_.shared().cfg.lease);
    run(s, [this, s](error_code ec) {
        auto e = ec ? ec : s->error();
        p_.fsm().on_renew_done(e, e ? renew_result{} : renew_result{s->owned(), s->contended()}, p_.local_now());
        p_.step();
    });
}

void memcached_recipe::release(const detail::fsm_action& a)
{
    auto s = std::make_shared<memcached::owner_steps>(memcached::owner_steps::op::release, keys(), a.token);
    auto id = a.id;
    run(s, [this, s, id](error_code ec) {
        auto e = ec ? ec : s->error();
        p_.fsm().on_release_done(id, e, !e && s->owned(), p_.local_now());
        p_.step();
    });
}

// No pub/sub: ready at once, and nothing more (the waiter sleeps on the holder's lease).
void memcached_recipe::watch(const detail::fsm_action&)
{
    watching_ = true;
    p_.later(real_time(0), [this] {
        if (watching_) {
            p_.fsm().on_watch(watch_event::ready, {}, p_.local_now());
            p_.step();
        }
    });
}

}  // namespace dlock::sim
