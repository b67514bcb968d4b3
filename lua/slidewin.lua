#!lua name=slidewin
--[[
slidewin as a Redis FUNCTION library: the fallback for servers where
MODULE LOAD is not allowed (many managed Redis/Valkey services).

  FUNCTION LOAD "$(cat lua/slidewin.lua)"            (Redis 7.0+, Valkey)

  FCALL    slidewin_check  1 key limit window_ms [COST count] [ID request-id]
                             [DETAIL] [WITHMEMBERS] [SHADOW]
  FCALL_RO slidewin_peek   1 key limit window_ms [COST count] [DETAIL]
  FCALL    slidewin_mcheck N key1 .. keyN limit1 window_ms1 .. limitN window_msN
                             [COST count] [ID request-id] [DETAIL] [WITHMEMBERS]
                             [SHADOW]
  FCALL    slidewin_undo   1 key member [member ...]
  FCALL    slidewin_undo   1 key ID request-id
  FCALL    slidewin_settle 1 key ID request-id COST units
  FCALL    slidewin_top    0            (an error: SLIDEWIN.TOP needs the module)

Same semantics, replies, errors and data layout as the module's
SLIDEWIN.CHECK / PEEK / MCHECK / UNDO / SETTLE: each key is a plain sorted
set, one entry per unit, scored with the server time in ms (TIME), members
the same integers (short ids counting up from the key's newest member, wide
ids now_ms * 2^20 + sequence when a short one is taken; WITHMEMBERS hands
them out as tokens `<id>@<score_ms>`), and a charge made with `ID r` held as
the members `#1:r` .. `#<units>:r` scored at the charge's time, so a
deployment can move between the function and the module on live keys.
Differences, all
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
-- The longest request id (the module's MAX_REQUEST_ID).
local MAX_REQUEST_ID = 128
-- The module's slidewin.max-entries-per-call at its default (0: max-limit).
local MAX_ENTRIES_PER_CALL = MAX_LIMIT
local WRONGTYPE = 'WRONGTYPE Operation against a key holding the wrong kind of value'

-- A counter kept for the life of the library (an upvalue of every
-- function), like the module's per-process member sequence.
local sequence = 0

-- The same-millisecond fence, kept for the life of the library like the
-- module's per process: after an UNDO removes the integer member `id` scored
-- at the current ms, new ids chosen in that ms start above it, so a token
-- `<id>@<ms>` handed out before the UNDO never names a later entry. The
-- EVAL form starts it again at every call (a script keeps nothing between
-- calls): see docs/clients.md.
local fence_ms, fence_id = -1, 0

-- Notes that an UNDO removed member `m` (a canonical integer) scored `score`
-- at `now`: the fence rises above it when that score is this millisecond.
-- A wide id (beyond Lua's exact integers) raises it above every short id.
local function fence_after_undo(m, score, now)
    if tonumber(score) ~= now then return end
    local id = math.huge
    if #m <= 15 then id = tonumber(m) end
    if fence_ms ~= now then
        fence_ms, fence_id = now, id
    elseif id > fence_id then
        fence_id = id
    end
end

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

-- A canonical non-negative decimal integer that fits a signed 64-bit
-- integer (as the module parses a token's parts), or nil.
local function canonical_u63(s)
    if not (s == '0' or s:match('^[1-9]%d*$')) then return nil end
    if #s > 19 or (#s == 19 and s > '9223372036854775807') then return nil end
    return s
end

-- An integer in 0..max, as int_in parses it.
local function int_in_0(s, max)
    if s == '0' then return 0 end
    return int_in(s, max)
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
-- the key is empty, one more than the entries when its newest member is
-- not an integer (a charge's `#` member, the old script's); nil when it is
-- a wide id (beyond Lua's exact integers: the caller uses a wide id).
local function first_short(key)
    local last = redis.call('ZRANGE', key, -1, -1)[1]
    if last == nil then return 1 end
    if last == '0' or last:match('^[1-9]%d*$') then
        if #last > 15 then return nil end
        return tonumber(last) + 1
    end
    return redis.call('ZCARD', key) + 1
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
    if short and fence_ms == now and short <= fence_id then
        -- Above an id an UNDO freed in this millisecond (the fence): the
        -- next short id, or a wide one after a wide id was freed.
        if fence_id == math.huge then short = nil else short = fence_id + 1 end
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

-- The error for a request id out of bounds, or nil.
local function request_id_error(r)
    if #r < 1 or #r > MAX_REQUEST_ID then
        return 'ERR ID must be 1 to ' .. MAX_REQUEST_ID .. ' bytes'
    end
    return nil
end

local function ms_until_expired(score, window, now)
    return math.ceil(score + window - now)
end

-- Options after the rules: COST count, DETAIL, and for writes ID request-id,
-- WITHMEMBERS and SHADOW (PEEK always replies in detail: DETAIL is accepted there
-- and changes nothing).
local function parse_options(args, from, write)
    local o = { cost = 1, detail = false, members = false, shadow = false, id = nil }
    local seen = {}
    local i = from
    while i <= #args do
        local opt = string.upper(args[i])
        if not write and opt == 'WITHMEMBERS' then
            return nil, 'ERR PEEK records nothing, so it takes no WITHMEMBERS (CHECK and MCHECK do)'
        end
        if not write and opt == 'ID' then
            return nil, 'ERR PEEK records nothing: ID applies to CHECK and MCHECK'
        end
        if not write and opt == 'SHADOW' then
            return nil, 'ERR PEEK refuses nothing: SHADOW applies to CHECK and MCHECK'
        end
        local known = opt == 'COST' or opt == 'DETAIL' or
            (write and (opt == 'WITHMEMBERS' or opt == 'ID' or opt == 'SHADOW'))
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
        elseif opt == 'ID' then
            if i == #args then return nil, 'ERR ID needs a request id' end
            local e = request_id_error(args[i + 1])
            if e then return nil, e end
            o.id = args[i + 1]
            i = i + 2
        else
            if opt == 'DETAIL' then
                o.detail = true
            elseif opt == 'SHADOW' then
                o.shadow = true
            else
                o.members = true
            end
            i = i + 1
        end
    end
    if o.id and o.members then
        return nil, 'ERR WITHMEMBERS and ID cannot be combined: give a charge made with an ID back with SLIDEWIN.UNDO key ID request-id'
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

-- Pairs sent to one ZADD or members to one ZREM: unpack() fails from
-- 8000 values (Lua's C stack), and COST and SETTLE go up to 100000.
local BATCH = 1000

local function add(key, now, members)
    local i = 1
    while i <= #members do
        local args = {}
        for j = i, math.min(#members, i + BATCH - 1) do
            args[#args + 1] = now
            args[#args + 1] = members[j]
        end
        redis.call('ZADD', key, unpack(args))
        i = i + BATCH
    end
end

-- The member holding unit `i` of the charge under request id `r`.
local function unit_member(i, r)
    return '#' .. string.format('%d', i) .. ':' .. r
end

-- The charge under `r` in `key`: its score and its units, or nil when the
-- key holds none. The units are always the prefix #1:r .. #units:r (SETTLE
-- removes the highest, UNDO by member none), so they are counted as the
-- module counts them: double until a unit is missing, then a binary search,
-- O(log units) lookups.
local function charge(key, r)
    local score = redis.call('ZSCORE', key, unit_member(1, r))
    if not score then return nil end
    -- At most the key's entries, as the module: a key another writer laid
    -- out as #1, #2, #4 ... #2^40 must not make UNDO or SETTLE walk 2^40.
    local entries = redis.call('ZCARD', key)
    local lo, hi = 1, 2
    while hi <= entries and redis.call('ZSCORE', key, unit_member(hi, r)) do
        lo, hi = hi, hi * 2
    end
    hi = math.max(math.min(hi, entries + 1), lo + 1)
    while hi - lo > 1 do
        local mid = lo + math.floor((hi - lo) / 2)
        if redis.call('ZSCORE', key, unit_member(mid, r)) then lo = mid else hi = mid end
    end
    return tonumber(score), lo
end

-- Adds units held+1 .. to of the charge under `r`, scored `score`.
local function add_units(key, r, score, held, to)
    -- Every score given is a whole millisecond; another writer's is floored,
    -- as the module does.
    score = string.format('%.0f', math.floor(score))
    local i = held + 1
    while i <= to do
        local args = {}
        for j = i, math.min(to, i + BATCH - 1) do
            args[#args + 1] = score
            args[#args + 1] = unit_member(j, r)
        end
        redis.call('ZADD', key, unpack(args))
        i = i + BATCH
    end
end

-- Removes units keep+1 .. held of the charge under `r`; how many it removed.
local function remove_units(key, r, keep, held)
    local removed = 0
    local i = keep + 1
    while i <= held do
        local args = {}
        for j = i, math.min(held, i + BATCH - 1) do
            args[#args + 1] = unit_member(j, r)
        end
        removed = removed + redis.call('ZREM', key, unpack(args))
        i = i + BATCH
    end
    return removed
end

-- What WITHMEMBERS hands out: `<id>@<score_ms>` for each member added at `now`.
local function tokens(members, now)
    local at = '@' .. string.format('%.0f', now)
    local out = {}
    for i, m in ipairs(members) do out[i] = m .. at end
    return out
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
    if o.id and charge(key, o.id) then
        -- A repeat: charges nothing, changes nothing more (the trim aside).
        if not o.detail then return 1 end
        local reply = { 1, limit, math.max(0, limit - n), 0, reset_after(key, now, window) }
        if o.shadow then reply[6] = 0 end
        return reply
    end
    local allowed = n + o.cost <= limit
    local members = {}
    local at
    if write and allowed then
        at = expiry(key, now, window)
        if o.id then
            add_units(key, o.id, now, 0, o.cost)
        else
            members = fresh_members({ key }, now, o.cost)
            add(key, now, members)
        end
        redis.call('PEXPIREAT', key, at)
    end
    -- SHADOW: a refused call is answered as allowed (nothing was added);
    -- the other fields are the real ones, and shadow_refused says so.
    local answered = allowed or o.shadow
    if write and not o.detail then
        return answered and 1 or 0
    end
    local count = n
    if write and allowed then count = n + o.cost end
    local reply = { answered and 1 or 0, limit, math.max(0, limit - count) }
    if allowed then
        reply[4] = 0
        if write then reply[5] = at - now else reply[5] = reset_after(key, now, window) end
    else
        reply[4] = retry_after(key, now, limit, window, o.cost, n)
        reply[5] = reset_after(key, now, window)
    end
    if o.shadow then reply[#reply + 1] = allowed and 0 or 1 end
    if o.members then reply[#reply + 1] = tokens(members, now) end
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
    if o.id then
        for _, k in ipairs(distinct) do
            if charge(k, o.id) then
                -- A repeat: any key holding the charge answers for the call.
                if not o.detail then return 1 end
                local reply = { 1, 0 }
                for i = 1, rules do
                    local n = redis.call('ZCOUNT', keys[i], '(' .. (now - windows[i]), '+inf')
                    reply[#reply + 1] = { 1, limits[i], math.max(0, limits[i] - n), 0,
                        reset_after(keys[i], now, windows[i]) }
                end
                if o.shadow then reply[#reply + 1] = 0 end
                return reply
            end
        end
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
        if not o.id then members = fresh_members(distinct, now, o.cost) end
        for _, k in ipairs(distinct) do
            local at = now + longest[k]
            if future[k] and future[k] > now then
                at = now + ms_until_expired(future[k], longest[k], now)
            end
            if o.id then add_units(k, o.id, now, 0, o.cost) else add(k, now, members) end
            redis.call('PEXPIREAT', k, at)
        end
    end
    local answered = allowed or o.shadow
    if not o.detail then return answered and 1 or 0 end
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
    local reply = { answered and 1 or 0, allowed and 0 or retry }
    for i = 1, rules do reply[#reply + 1] = details[i] end
    if o.shadow then reply[#reply + 1] = allowed and 0 or 1 end
    if o.members then reply[#reply + 1] = tokens(members, now) end
    return reply
end

-- SETTLE and UNDO take no window: the key's own is the one its expiry gives
-- (CHECK sets it to the newest entry's score plus the window), so entries
-- scored at or below newest - PTTL have left it, as the module's
-- window::own_cutoff. nil (nothing expired) without an expiry or entries.
local function own_cutoff(key)
    local ttl = redis.call('PTTL', key)
    if ttl < 0 then return nil end
    local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    if #newest < 2 then return nil end
    return string.format('%.0f', math.floor(tonumber(newest[2]) - ttl))
end

-- Removes what has left the key's own window (see own_cutoff).
local function trim_own(key, cutoff)
    if cutoff then redis.call('ZREMRANGEBYSCORE', key, '-inf', cutoff) end
end

-- UNDO key ID r: the charge's units. UNDO key member ...: a token
-- `<id>@<ms>` removes member id only while it is scored ms; anything else
-- is removed as a plain member, except a charge's `#` members.
local function undo(keys, args)
    if #keys ~= 1 or #args < 1 then return arity('slidewin.undo') end
    local key = keys[1]
    if string.upper(args[1]) == 'ID' then
        if #args ~= 2 then return err('ERR syntax error: SLIDEWIN.UNDO key ID request-id') end
        local e = request_id_error(args[2])
        if e then return err(e) end
        local wt = wrong_type(key)
        if wt then return err(wt) end
        trim_own(key, own_cutoff(key))
        local score, units = charge(key, args[2])
        if not score then return 0 end
        return remove_units(key, args[2], 0, units)
    end
    local wt = wrong_type(key)
    if wt then return err(wt) end
    trim_own(key, own_cutoff(key))
    local now
    local removed = 0
    for _, a in ipairs(args) do
        local m, ms = a, nil
        local id, at = a:match('^(%d+)@(%d+)$')
        if id and canonical_u63(id) and canonical_u63(at) then
            m, ms = id, at
        end
        if m:sub(1, 1) ~= '#' then
            local integer = canonical_u63(m)
            local score = (ms or integer) and redis.call('ZSCORE', key, m)
            if ms == nil or (score and tonumber(score) == tonumber(ms)) then
                local r = redis.call('ZREM', key, m)
                if r == 1 and integer and score then
                    now = now or now_ms()
                    fence_after_undo(m, score, now)
                end
                removed = removed + r
            end
        end
    end
    return removed
end

-- SETTLE key ID r COST units: the charge under r set to `units`.
local function settle(keys, args)
    if #keys ~= 1 or #args ~= 4 then return arity('slidewin.settle') end
    if string.upper(args[1]) ~= 'ID' or string.upper(args[3]) ~= 'COST' then
        return err('ERR syntax error: SLIDEWIN.SETTLE key ID request-id COST units')
    end
    local r = args[2]
    local units = int_in_0(args[4], MAX_LIMIT)
    if not units then
        return err('ERR COST units must be an integer between 0 and ' .. MAX_LIMIT .. ' (slidewin.max-limit)')
    end
    local e = request_id_error(r)
    if e then return err(e) end
    local key = keys[1]
    local wt = wrong_type(key)
    if wt then return err(wt) end
    -- Trimmed first, as CHECK trims: a charge that has left the key's
    -- window is none. A refused raise changes nothing, not even the trim.
    local cutoff = own_cutoff(key)
    local score, held = charge(key, r)
    if score and cutoff and score <= tonumber(cutoff) then score = nil end
    if score and units > held then
        -- The increase never exceeds MAX_ENTRIES_PER_CALL here: both are
        -- max-limit, the module's defaults. The key stays within max-limit
        -- entries, as CHECK's limit keeps it.
        local n
        if cutoff then
            n = redis.call('ZCOUNT', key, '(' .. cutoff, '+inf')
        else
            n = redis.call('ZCARD', key)
        end
        local entries = n + units - held
        if entries > MAX_LIMIT then
            return err('ERR SETTLE to ' .. units .. ' units would leave the key with ' ..
                string.format('%d', entries) .. ' entries; slidewin.max-limit allows ' .. MAX_LIMIT)
        end
    end
    trim_own(key, cutoff)
    if not score then return -1 end
    if units < held then
        remove_units(key, r, units, held)
    elseif units > held then
        add_units(key, r, score, held, units)
    end
    return units
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
redis.register_function('slidewin_settle', settle)
-- SLIDEWIN.TOP needs the module's in-memory summary of every decision; a
-- function cannot keep one.
redis.register_function('slidewin_top', function()
    return err('ERR slidewin_top is not available without the module: SLIDEWIN.TOP needs the module loaded (--loadmodule libslidewin.so)')
end)
