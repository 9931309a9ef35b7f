// SPDX-License-Identifier: BSL-1.0
// Sans-io bookkeeping of pub/sub channels: who watches each one, which SUBSCRIBEs are
// unconfirmed, and whether a confirmation is the first (`ready`) or a repeat (`resync`).
// No sockets, timers or handlers: the caller sends what it is told to and calls back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace dlock::detail {

/// Channels with their watchers, for a subscriber that keeps its subscriptions across
/// reconnects. Used by redis::subscriber (SUBSCRIBE) and cluster_store (SSUBSCRIBE, per node).
class channel_table {
public:
    using watcher_id = std::uint64_t;

    /// What a confirmation means to the channel's watchers.
    enum class confirm_kind : unsigned char {
        none,    ///< nothing to tell (still pending, or already confirmed)
        ready,   ///< first confirmation: messages arrive from now on
        resync,  ///< confirmed again after it was lost: messages may have been missed
    };
    struct confirmation {
        confirm_kind kind = confirm_kind::none;
        std::vector<watcher_id> watchers;  ///< who to tell; empty for `none`
    };

    /// Adds watcher `w` to `channel`. True when it is the channel's first: the caller sends
    /// SUBSCRIBE now (counted as pending).
    bool add(const std::string& channel, watcher_id w);
    /// Removes watcher `w`. True when it was the channel's last: the channel is forgotten and
    /// the caller sends UNSUBSCRIBE.
    bool remove(const std::string& channel, watcher_id w);

    /// The server confirmed a SUBSCRIBE. Tells who to notify once the last one sent is in.
    confirmation on_confirm(const std::string& channel);
    /// The caller sends SUBSCRIBE again (a reconnect, or the channel moved to another node).
    void on_resubscribe(const std::string& channel);
    /// The subscription is gone without a new one sent (the connection dropped, the server
    /// refused or dropped it): nothing is pending, and the next confirmation is a resync.
    void on_lost(const std::string& channel);

    /// The connection dropped: every channel is lost. Returns the channels, to be subscribed
    /// again by resubscribe_all() once connected; their watchers hear `resync` at the
    /// confirmation that follows (not now: until then messages can still be missed).
    std::vector<std::string> on_disconnect();
    /// Connected again: every channel, each marked as sent.
    std::vector<std::string> resubscribe_all();

    bool contains(const std::string& channel) const { return channels_.count(channel) != 0; }
    /// Confirmed and not lost since.
    bool is_confirmed(const std::string& channel) const;
    /// SUBSCRIBEs sent for it and not yet confirmed.
    int pending(const std::string& channel) const;
    /// The channel's watchers, oldest first; empty if unknown.
    std::vector<watcher_id> watchers(const std::string& channel) const;
    /// The same without a copy: valid until the table next changes.
    std::span<const watcher_id> watchers_view(const std::string& channel) const;
    /// Channels with at least one watcher.
    std::size_t size() const noexcept { return channels_.size(); }
    /// Every channel's name.
    std::vector<std::string> channels() const;

private:
    struct entry {
        std::vector<watcher_id> watchers;
        int pending = 0;  // SUBSCRIBEs sent whose confirmation has not arrived
        bool confirmed = false;
        bool was_confirmed = false;  // confirmed before: the next confirmation is a resync
    };
    void unconfirm(const std::string& channel, int pending);

    std::unordered_map<std::string, entry> channels_;
};

}  // namespace dlock::detail
