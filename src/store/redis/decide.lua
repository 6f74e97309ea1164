
if redis.replicate_commands then pcall(redis.replicate_commands) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = #KEYS
-- The first `own` keys are the client's own rules: when they refuse, the others are not read.
local own = math.min(tonumber(ARGV[4 * n + 1]) or n, n)
local used, reset, start = {}, {}, {}
local refuse, wait = 0, 0
local read = n
for i = 1, n do
  if i == own + 1 and refuse > 0 then
    read = own
    break
  end
  local kind = ARGV[4 * i - 3]
  local limit = tonumber(ARGV[4 * i - 2])
  local window = tonumber(ARGV[4 * i - 1])
  -- What the request counts here: 1, or a file's kibibytes (0 while its size is unknown, then
  -- admitted only below the limit).
  local amount = tonumber(ARGV[4 * i])
  local w = nil
  -- A key left by a rule of the other algorithm (the configuration changed) starts afresh.
  local ty = redis.call('TYPE', KEYS[i]).ok
  if ty ~= 'none' and ty ~= (kind == 'f' and 'hash' or 'zset') then
    redis.call('DEL', KEYS[i])
  end
  if kind == 'f' then
    local v = redis.call('HMGET', KEYS[i], 's', 'c')
    local s, c = tonumber(v[1]), tonumber(v[2])
    if s == nil or c == nil or now >= s + window then
      s = nil
      c = 0
    end
    start[i] = s
    used[i] = c
    reset[i] = 0
    if s then reset[i] = s + window - now end
    if c + math.max(amount, 1) > limit then
      -- A file larger than the whole limit fits no window: it waits a whole one.
      if s then w = math.max(reset[i], 1) else w = math.max(window, 1) end
    end
  else
    redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - window)
    local c = redis.call('ZCARD', KEYS[i])
    used[i] = c
    reset[i] = 0
    if c > 0 then
      local oldest = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')
      reset[i] = tonumber(oldest[2]) + window - now
    end
    if c >= limit then
      local r = redis.call('ZRANGE', KEYS[i], c - limit, c - limit, 'WITHSCORES')
      w = math.max(tonumber(r[2]) + window - now, 1)
    end
  end
  if w and w > wait then
    refuse = i
    wait = w
  end
end
local out
if refuse > 0 then
  out = {0, refuse, wait, now}
else
  for i = 1, n do
    local kind = ARGV[4 * i - 3]
    local window = tonumber(ARGV[4 * i - 1])
    local amount = tonumber(ARGV[4 * i])
    if kind == 'f' then
      if start[i] then
        redis.call('HINCRBY', KEYS[i], 'c', amount)
        redis.call('PEXPIREAT', KEYS[i], start[i] + window)
      else
        redis.call('HSET', KEYS[i], 's', now, 'c', amount)
        redis.call('PEXPIRE', KEYS[i], window)
        reset[i] = window
      end
    else
      -- A member of its own: after a refund, an earlier request of this millisecond may hold
      -- the name that the count gives.
      local seq = used[i]
      while redis.call('ZSCORE', KEYS[i], now .. '-' .. seq) do seq = seq + 1 end
      redis.call('ZADD', KEYS[i], now, now .. '-' .. seq)
      redis.call('PEXPIRE', KEYS[i], window)
      if used[i] == 0 then reset[i] = window end
      amount = 1
    end
    used[i] = used[i] + amount
  end
  out = {1, 0, 0, now}
end
for i = 1, read do
  out[#out + 1] = used[i]
  out[#out + 1] = reset[i]
end
return out
