
local at = tonumber(ARGV[1])
for i = 1, #KEYS do
  local kind = ARGV[1 + i]
  if kind == 'f' then
    local v = redis.call('HMGET', KEYS[i], 's', 'c')
    local s, c = tonumber(v[1]), tonumber(v[2])
    if s and c and c > 0 and s <= at then
      redis.call('HINCRBY', KEYS[i], 'c', -1)
    end
  elseif string.sub(kind, 1, 1) == '+' then
    -- A file's kibibytes charged after the answer, to the window that admitted it.
    local v = redis.call('HMGET', KEYS[i], 's', 'c')
    local s, c = tonumber(v[1]), tonumber(v[2])
    if s and c and s <= at then
      redis.call('HINCRBY', KEYS[i], 'c', tonumber(string.sub(kind, 2)))
    end
  else
    local m = redis.call('ZRANGEBYSCORE', KEYS[i], at, at, 'LIMIT', 0, 1)
    if m[1] then
      redis.call('ZREM', KEYS[i], m[1])
    end
  end
end
return 1
