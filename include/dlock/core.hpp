// SPDX-License-Identifier: BSL-1.0
/// @file
/// The store-independent API: registry, lock, guard, settings, errors, the store contract
/// and the in-process memory store. Links against dlock::core alone.
#pragma once

#include <dlock/capabilities.hpp>
#include <dlock/config.hpp>
#include <dlock/election.hpp>
#include <dlock/error.hpp>
#include <dlock/guard.hpp>
#include <dlock/latch.hpp>
#include <dlock/lock.hpp>
#include <dlock/memory_store.hpp>
#include <dlock/owner.hpp>
#include <dlock/registry.hpp>
#include <dlock/rw_lock.hpp>
#include <dlock/semaphore.hpp>
#include <dlock/stats.hpp>
#include <dlock/store.hpp>
#include <dlock/version.hpp>
