--[[
slidewin's figures for prometheus-redis-exporter, which reads no module's
INFO section itself:

  prometheus-redis-exporter -redis.addr redis://127.0.0.1:6379 \
      -script /path/to/integrations/prometheus/slidewin.lua

The exporter runs this script (EVAL) at every scrape and exports each
returned pair as redis_script_values{key="<name>"} <value>:

  slidewin_<counter>             every integer field of INFO slidewin
                                 (slidewin_checks_allowed, _checks_denied,
                                 _checks_shadow_refused, _cost_granted, ...)
  slidewin_slowlog_entries       slow-log entries of SLIDEWIN.* commands now
                                 in the slow log (of the newest 128)
  slidewin_slowlog_last_id       the id of the newest of them (-1: none); it
                                 rises with every new one
  slidewin_slowlog_max_us        the longest of them, in microseconds
  slidewin_scan_keys             limiter keys measured this scrape
  slidewin_largest_key_bytes     the largest MEMORY USAGE among them

The keys measured are the first SCAN_LIMIT sorted sets and compact logs of
a SCAN from the start (the same ones every scrape on a quiet keyspace): a
bound on the time the script holds the server. Raise it on a small
keyspace; for a full pass use `python -m slidewin health`.
]]

local SCAN_LIMIT = 1000
local out = {}

local function put(name, value)
    out[#out + 1] = name
    out[#out + 1] = tostring(value)
end

local info = redis.call('INFO', 'slidewin')
for name, value in string.gmatch(info, '(slidewin_[%w_]+):(%-?%d+)\r?\n') do
    put(name, value)
end

local slow = redis.call('SLOWLOG', 'GET', 128)
local entries, last_id, max_us = 0, -1, 0
for _, e in ipairs(slow) do
    local argv = e[4]
    local name = argv and argv[1] and string.lower(argv[1]) or ''
    if string.sub(name, 1, 9) == 'slidewin.' then
        entries = entries + 1
        if e[1] > last_id then last_id = e[1] end
        if e[3] > max_us then max_us = e[3] end
    end
end
put('slidewin_slowlog_entries', entries)
put('slidewin_slowlog_last_id', last_id)
put('slidewin_slowlog_max_us', max_us)

local seen, largest = 0, 0
for _, kind in ipairs({ 'zset', 'slidewlog' }) do
    local cursor = '0'
    repeat
        -- (Valkey refuses a type name no loaded module registered: the
        -- compact log's, with slidewin.log-type zset. Nothing to scan then.)
        local r = redis.pcall('SCAN', cursor, 'COUNT', 100, 'TYPE', kind)
        if r.err then break end
        cursor = r[1]
        for _, key in ipairs(r[2]) do
            if seen < SCAN_LIMIT then
                seen = seen + 1
                local bytes = redis.call('MEMORY', 'USAGE', key) or 0
                if bytes > largest then largest = bytes end
            end
        end
    until cursor == '0' or seen >= SCAN_LIMIT
end
put('slidewin_scan_keys', seen)
put('slidewin_largest_key_bytes', largest)

return out
