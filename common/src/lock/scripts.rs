//! The Lua scripts of the lock protocols (see the module above), each run atomically by
//! Redis.

use redis::Script;

/// Shared Lua helpers, prepended to the scripts that need them.
///
/// `now_ms` reads the server clock. `expire_with_last_member` keeps a permit set alive
/// exactly as long as its longest lease, so an idle set disappears on its own.
const LUA_HELPERS: &str = r#"
local function now_ms()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
local function expire_with_last_member(key, now)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then
    redis.call('PEXPIRE', key, math.max(1, math.ceil(tonumber(last[2]) - now)))
  end
end
"#;

/// KEYS[1] mutex, ARGV[1] token, ARGV[2] lease ms. Returns 1 if we hold it now.
/// Taking a lock we already hold (same token: a retry whose first reply was lost) re-arms it.
const MUTEX_ACQUIRE: &str = r#"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"#;

/// KEYS[1] mutex, ARGV[1] token, ARGV[2] lease ms. Compare-and-PEXPIRE: 1 if renewed.
const MUTEX_RENEW: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"#;

/// KEYS[1] mutex, ARGV[1] token. Compare-and-delete: 1 if we held it.
const MUTEX_RELEASE: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"#;

/// KEYS[1] permit set, ARGV[1] token, ARGV[2] max holders, ARGV[3] lease ms. 1 if we hold one.
const PERMIT_ACQUIRE: &str = r#"
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
    return 0
  end
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
expire_with_last_member(KEYS[1], now)
return 1
"#;

/// KEYS[1] permit set, ARGV[1] token, ARGV[2] lease ms. 1 if renewed, 0 if expired or gone.
const PERMIT_RENEW: &str = r#"
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
expire_with_last_member(KEYS[1], now)
return 1
"#;

/// KEYS[1] permit set, ARGV[1] token. 1 if we held an unexpired permit.
const PERMIT_RELEASE: &str = r#"
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms())
return redis.call('ZREM', KEYS[1], ARGV[1])
"#;

/// The scripts, hashed once. `Script` sends `EVALSHA` and falls back to loading the
/// script when Redis answers `NOSCRIPT` (after a restart or `SCRIPT FLUSH`).
pub(super) struct Scripts {
    pub(super) mutex_acquire: Script,
    pub(super) mutex_renew: Script,
    pub(super) mutex_release: Script,
    pub(super) permit_acquire: Script,
    pub(super) permit_renew: Script,
    pub(super) permit_release: Script,
}

impl Scripts {
    pub(super) fn new() -> Self {
        let with_helpers = |body: &str| Script::new(&format!("{LUA_HELPERS}{body}"));
        Scripts {
            mutex_acquire: Script::new(MUTEX_ACQUIRE),
            mutex_renew: Script::new(MUTEX_RENEW),
            mutex_release: Script::new(MUTEX_RELEASE),
            permit_acquire: with_helpers(PERMIT_ACQUIRE),
            permit_renew: with_helpers(PERMIT_RENEW),
            permit_release: with_helpers(PERMIT_RELEASE),
        }
    }
}
