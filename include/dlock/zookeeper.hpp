// SPDX-License-Identifier: BSL-1.0
/// @file
/// The ZooKeeper backend (dlock::zookeeper): Curator-compatible locks on a ZooKeeper ensemble.
#pragma once

#include <dlock/zookeeper/config.hpp>
#include <dlock/zookeeper/store.hpp>
