// Everything of dlock's public API.
#pragma once

#include <dlock/cluster_store.hpp>
#include <dlock/config.hpp>
#include <dlock/error.hpp>
#include <dlock/guard.hpp>
#include <dlock/lock.hpp>
#include <dlock/memory_store.hpp>
#include <dlock/owner.hpp>
#include <dlock/redis/config.hpp>
#include <dlock/redis/connection.hpp>
#include <dlock/redis/subscriber.hpp>
#include <dlock/redis_store.hpp>
#include <dlock/redlock_store.hpp>
#include <dlock/registry.hpp>
#include <dlock/stats.hpp>
#include <dlock/store.hpp>
