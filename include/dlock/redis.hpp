// SPDX-License-Identifier: BSL-1.0
/// @file
/// The Redis backend (dlock::redis): single node and Sentinel, Cluster, Redlock, and the
/// connection they share.
#pragma once

#include <dlock/redis/cluster_store.hpp>
#include <dlock/redis/config.hpp>
#include <dlock/redis/connection.hpp>
#include <dlock/redis/redlock_store.hpp>
#include <dlock/redis/store.hpp>
#include <dlock/redis/subscriber.hpp>
