#!lua name=slidewin
--[[
slidewin as a Redis FUNCTION library: the fallback for servers where
MODULE LOAD is not allowed (many managed Redis/Valkey services).

  FUNCTION LOAD "$(cat scripts/slidewin.lua)"        (Redis 7.0+, Valkey)

  FCALL    slidewin_check  1 key limit window_ms [COST count] [DETAIL] [WITHMEMBERS]
  FCALL_RO slidewin_peek   1 key limit window_ms [COST count] [DETAIL]
  FCALL    slidewin_mcheck N key1 .. keyN limit1 window_ms1 .. limitN window_msN
                             [COST count] [DETAIL] [WITHMEMBERS]
  FCALL    slidewin_undo   1 key member [member ...]
  FCALL    slidewin_top    0            (an error: SLIDEWIN.TOP needs the module)

Same semantics, replies, errors and data layout as the module's
SLIDEWIN.CHECK / PEEK / MCHECK / UNDO: each key is a plain sorted set, one
entry per unit, scored with the server time in ms (TIME), members the same
integers (short ids counting up from the key's newest member, wide ids
now_ms * 2^20 + sequence when a short one is taken), so a deployment can
move between the function and the module on live keys. Differences, all
documented in docs/clients.md ("Without the module: the FUNCTION library"):
the clock is TIME (read when the function runs; the module uses the
server's cached command time), the bounds are the module's defaults
(limit and count <= 100000, window_ms <= 31622400000, at most 100000
entries added by one call: COST times MCHECK's distinct keys) rather than
its configuration, and MCHECK's keys come first (FCALL needs them before
the arguments).
]]

local MAX_LIMIT = 100000
local MAX_WINDOW = 31622400000
local MAX_RULES = 64
-- The module's slidewin.max-entries-per-call at its default (0: max-limit).
local MAX_ENTRIES_PER_CALL = MAX_LIMIT
local WRONGTYPE = 'WRONGTYPE Operation against a key holding the wrong kind of value'

-- A counter kept for the life of the library (an upvalue of every
-- function), like the module's per-process member sequence.
local sequence = 0

local function err(msg)
    return redis.error_reply(msg)
end

local function arity(name)
    return err("ERR wrong number of arguments for '" .. name .. "' command")
end

-- Integers as Redis parses them (string2ll): optional '-', digits, no
-- leading zeros, no '+', no spaces. Every bound here is below 2^53, so a
-- longer digit string is out of range either way.
local function int_in(s, max)
    if type(s) ~= 'string' or #s > 16 then return nil end
    if not (s == '0' or s:match('^%-?[1-9]%d*$')) then return nil end
    local v = tonumber(s)
    if v == nil or v < 1 or v > max then return nil end
    return v
end

local function now_ms()
    local t = redis.call('TIME')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The decimal string of now_ms * 2^20 + seq, exact beyond 2^53: the value
-- is kept as hi * 10^6 + lo.
local function member_parts(now, seq)
    local a = math.floor(now / 1000000)
    local b = now % 1000000
    local hi = a * 1048576
    local lo = b * 1048576 + (seq % 1048576)
    hi = hi + math.floor(lo / 1000000)
    lo = lo % 1000000
    return hi, lo
end

local function member_string(hi, lo)
    if hi == 0 then return string.format('%.0f', lo) end
    return string.format('%.0f%06d', hi, lo)
end

local function next_parts(hi, lo)
    lo = lo + 1
    if lo >= 1000000 then return hi + 1, 0 end
    return hi, lo
end

-- Whether member `m` is free in every key of `keys` and not yet chosen.
local function free_in(keys, taken, m)
    if taken[m] then return false end
    for _, k in ipairs(keys) do
        if redis.call('ZSCORE', k, m) then return false end
    end
    return true
end

-- The first short id to try after the newest entry of `key`, as the module
-- picks it: one more than its member when that is a short integer, 1 when
-- the key is empty or its newest member is not an integer; nil when it is
-- a wide id (beyond Lua's exact integers: the caller uses a wide id).
local function first_short(key)
    local last = redis.call('ZRANGE', key, -1, -1)[1]
    if last == nil then return 1 end
    if last == '0' or last:match('^[1-9]%d*$') then
        if #last > 15 then return nil end
        return tonumber(last) + 1
    end
    return 1
end

-- `count` member names free in every key of `keys`: short ids counting up
-- from above every key's newest, or wide ids when one is taken.
local function fresh_members(keys, now, count)
    local out = {}
    local taken = {}
    local short = 1
    for _, k in ipairs(keys) do
        local f = first_short(k)
        if f == nil then short = nil break end
        if f > short then short = f end
    end
    for _ = 1, count do
        local m = short and string.format('%.0f', short)
        if m and free_in(keys, taken, m) then
            short = short + 1
        else
            short = nil
            sequence = sequence + 1
            local hi, lo = member_parts(now, sequence)
            m = member_string(hi, lo)
            while not free_in(keys, taken, m) do
                hi, lo = next_parts(hi, lo)
                m = member_string(hi, lo)
            end
        end
        taken[m] = true
        out[#out + 1] = m
    end
    return out
end

-- The error for a key the library cannot use as a log, or nil: a compact
-- log (the module's `slidewlog` type, with slidewin.log-type compact) is
-- named as such; any other type is WRONGTYPE as the module answers.
local function wrong_type(key)
    local t = redis.call('TYPE', key)['ok']
    if t == 'zset' or t == 'none' then return nil end
    if t == 'slidewlog' then
        return 'ERR the key holds a compact log (slidewin.log-type compact): only the module\'s SLIDEWIN.* commands read it, not this library'
    end
    return WRONGTYPE
end

local function ms_until_expired(score, window, now)
    return math.ceil(score + window - now)
end

-- Options after the rules: COST count, DETAIL, and for writes WITHMEMBERS
-- (PEEK always replies in detail: DETAIL is accepted there and changes nothing).
local function parse_options(args, from, write)
    local o = { cost = 1, detail = false, members = false }
    local seen = {}
    local i = from
    while i <= #args do
        local opt = string.upper(args[i])
        if not write and opt == 'WITHMEMBERS' then
            return nil, 'ERR PEEK records nothing, so it takes no WITHMEMBERS (CHECK and MCHECK do)'
        end
        local known = opt == 'COST' or opt == 'DETAIL' or (write and opt == 'WITHMEMBERS')
        if not known then
            local shown = args[i]:sub(1, 32):gsub('[^%w%p ]', function(c)
                return string.format('\\x%02x', string.byte(c))
            end)
            if #args[i] > 32 then shown = shown .. '...' end
            return nil, "ERR unknown option '" .. shown .. "'"
        end
        if seen[opt] then
            return nil, 'ERR option ' .. opt .. ' given more than once'
        end
        seen[opt] = true
        if opt == 'COST' then
            if i == #args then return nil, 'ERR COST needs a count' end
            o.cost = int_in(args[i + 1], MAX_LIMIT)
            if not o.cost then
                return nil, 'ERR COST count must be an integer between 1 and ' .. MAX_LIMIT .. ' (slidewin.max-limit)'
            end
            i = i + 2
        else
            if opt == 'DETAIL' then o.detail = true else o.members = true end
            i = i + 1
        end
    end
    o.detail = o.detail or o.members
    return o
end

local function limit_and_window(l, w)
    local limit = int_in(l, MAX_LIMIT)
    if not limit then return nil, nil, 'ERR limit must be an integer between 1 and ' .. MAX_LIMIT .. ' (slidewin.max-limit)' end
    local window = int_in(w, MAX_WINDOW)
    if not window then return nil, nil, 'ERR window_ms must be an integer between 1 and ' .. MAX_WINDOW .. ' (slidewin.max-window-ms)' end
    return limit, window
end

-- The largest score of `key` above `min` (exclusive), or nil.
local function newest_above(key, min)
    local r = redis.call('ZREVRANGEBYSCORE', key, '+inf', '(' .. min, 'WITHSCORES', 'LIMIT', 0, 1)
    if r[2] then return tonumber(r[2]) end
    return nil
end

-- The k-th smallest score above `cutoff`, or nil.
local function nth_above(key, cutoff, k)
    local r = redis.call('ZRANGEBYSCORE', key, '(' .. cutoff, '+inf', 'WITHSCORES', 'LIMIT', k - 1, 1)
    if r[2] then return tonumber(r[2]) end
    return nil
end

local function retry_after(key, now, limit, window, cost, n)
    if cost > limit then return -1 end
    local s = nth_above(key, now - window, n + cost - limit)
    if not s then return 1 end
    return math.max(1, ms_until_expired(s, window, now))
end

local function reset_after(key, now, window)
    local s = newest_above(key, now - window)
    if not s then return 0 end
    return math.max(0, ms_until_expired(s, window, now))
end

-- The absolute expiry of a key judged with `window` after adding at `now`.
local function expiry(key, now, window)
    local future = newest_above(key, now)
    if future and future > now then
        return now + ms_until_expired(future, window, now)
    end
    return now + window
end

local function add(key, now, members)
    local args = {}
    for _, m in ipairs(members) do
        args[#args + 1] = now
        args[#args + 1] = m
    end
    redis.call('ZADD', key, unpack(args))
end

local function check(keys, args, name, write)
    if #keys ~= 1 or #args < 2 then return arity(name) end
    local key = keys[1]
    local limit, window, e = limit_and_window(args[1], args[2])
    if e then return err(e) end
    local o, oe = parse_options(args, 3, write)
    if not o then return err(oe) end
    local wt = wrong_type(key)
    if wt then return err(wt) end
    local now = now_ms()
    local cutoff = now - window
    local n
    if write then
        redis.call('ZREMRANGEBYSCORE', key, '-inf', cutoff)
        n = redis.call('ZCARD', key)
    else
        n = redis.call('ZCOUNT', key, '(' .. cutoff, '+inf')
    end
    local allowed = n + o.cost <= limit
    local members = {}
    local at
    if write and allowed then
        at = expiry(key, now, window)
        members = fresh_members({ key }, now, o.cost)
        add(key, now, members)
        redis.call('PEXPIREAT', key, at)
    end
    if write and not o.detail then
        return allowed and 1 or 0
    end
    local count = n
    if write and allowed then count = n + o.cost end
    local reply = { allowed and 1 or 0, limit, math.max(0, limit - count) }
    if allowed then
        reply[4] = 0
        if write then reply[5] = at - now else reply[5] = reset_after(key, now, window) end
    else
        reply[4] = retry_after(key, now, limit, window, o.cost, n)
        reply[5] = reset_after(key, now, window)
    end
    if o.members then reply[6] = members end
    return reply
end

local function mcheck(keys, args)
    local name = 'slidewin.mcheck'
    local rules = #keys
    if rules < 1 or rules > MAX_RULES or #args < 2 * rules then
        -- As the server's own arity check would for SLIDEWIN.MCHECK (at least
        -- numrules and one triple).
        if #keys + #args < 3 then return arity(name) end
        return err('ERR numrules must be an integer between 1 and ' .. MAX_RULES ..
            ", followed by that many 'key limit window_ms' triples")
    end
    local limits, windows = {}, {}
    for i = 1, rules do
        local l, w, e = limit_and_window(args[2 * i - 1], args[2 * i])
        if e then return err(e) end
        limits[i], windows[i] = l, w
    end
    local o, oe = parse_options(args, 2 * rules + 1, true)
    if not o then return err(oe) end
    -- Distinct keys in order of first appearance, each with its longest window.
    local distinct, longest, index = {}, {}, {}
    for i = 1, rules do
        local k = keys[i]
        if not index[k] then
            distinct[#distinct + 1] = k
            index[k] = #distinct
            longest[k] = windows[i]
        elseif windows[i] > longest[k] then
            longest[k] = windows[i]
        end
    end
    -- COST entries in each distinct key, refused above the per-call bound
    -- before any key is read, as the module refuses them.
    local entries = o.cost * #distinct
    if entries > MAX_ENTRIES_PER_CALL then
        return err('ERR COST ' .. o.cost .. ' on ' .. #distinct .. ' key' .. (#distinct == 1 and '' or 's') ..
            ' would add ' .. entries .. ' entries; slidewin.max-entries-per-call allows ' ..
            MAX_ENTRIES_PER_CALL .. ' a call')
    end
    for _, k in ipairs(distinct) do
        local wt = wrong_type(k)
        if wt then return err(wt) end
    end
    local now = now_ms()
    for _, k in ipairs(distinct) do
        redis.call('ZREMRANGEBYSCORE', k, '-inf', now - longest[k])
    end
    local counts, fits, allowed = {}, {}, true
    for i = 1, rules do
        counts[i] = redis.call('ZCOUNT', keys[i], '(' .. (now - windows[i]), '+inf')
        fits[i] = counts[i] + o.cost <= limits[i]
        allowed = allowed and fits[i]
    end
    local members = {}
    local future = {}
    if allowed then
        for _, k in ipairs(distinct) do
            future[k] = newest_above(k, now)
        end
        members = fresh_members(distinct, now, o.cost)
        for _, k in ipairs(distinct) do
            local at = now + longest[k]
            if future[k] and future[k] > now then
                at = now + ms_until_expired(future[k], longest[k], now)
            end
            add(k, now, members)
            redis.call('PEXPIREAT', k, at)
        end
    end
    if not o.detail then return allowed and 1 or 0 end
    local retry = 0
    local details = {}
    for i = 1, rules do
        local own = 0
        if not fits[i] then
            own = retry_after(keys[i], now, limits[i], windows[i], o.cost, counts[i])
            if own < 0 or retry < 0 then retry = -1 else retry = math.max(retry, own) end
        end
        local count = counts[i]
        local reset
        if allowed then
            count = count + o.cost
            local newest = now
            if future[keys[i]] and future[keys[i]] > now then newest = future[keys[i]] end
            reset = math.max(0, ms_until_expired(newest, windows[i], now))
        else
            reset = reset_after(keys[i], now, windows[i])
        end
        details[i] = { fits[i] and 1 or 0, limits[i], math.max(0, limits[i] - count), own, reset }
    end
    local reply = { allowed and 1 or 0, allowed and 0 or retry }
    for i = 1, rules do reply[#reply + 1] = details[i] end
    if o.members then reply[#reply + 1] = members end
    return reply
end

local function undo(keys, args)
    if #keys ~= 1 or #args < 1 then return arity('slidewin.undo') end
    local wt = wrong_type(keys[1])
    if wt then return err(wt) end
    return redis.call('ZREM', keys[1], unpack(args))
end

redis.register_function('slidewin_check', function(keys, args)
    return check(keys, args, 'slidewin.check', true)
end)
redis.register_function{
    function_name = 'slidewin_peek',
    callback = function(keys, args) return check(keys, args, 'slidewin.peek', false) end,
    flags = { 'no-writes' },
}
redis.register_function('slidewin_mcheck', mcheck)
redis.register_function('slidewin_undo', undo)
-- SLIDEWIN.TOP needs the module's in-memory summary of every decision; a
-- function cannot keep one.
redis.register_function('slidewin_top', function()
    return err('ERR slidewin_top is not available without the module: SLIDEWIN.TOP needs the module loaded (--loadmodule libslidewin.so)')
end)
