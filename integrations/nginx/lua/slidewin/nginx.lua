--[[
slidewin for nginx + Lua (Debian's libnginx-mod-http-lua and lua-nginx-redis,
or OpenResty's lua-resty-redis): an access-phase handler that limits each
request with SLIDEWIN.CHECK ... DETAIL.

  lua_package_path "/path/to/integrations/nginx/lua/?.lua;;";
  lua_shared_dict slidewin_stats 64k;          # optional: outage/shadow counters

  location /api/ {
      access_by_lua_block {
          require("slidewin.nginx").limit({
              redis = { host = "127.0.0.1", port = 6379 },
              key = "header:X-API-Key",   -- or "remote_addr", or a function
              prefix = "rl:api:",
              limit = 100, window_ms = 60000,
              fail = "open",              -- or "closed" when Redis is away
          })
      }
  }

Allowed: the request goes on, with RateLimit-Limit, RateLimit-Remaining and
RateLimit-Reset headers on the response. Refused: 429 with Retry-After and
the same headers, nothing charged. `shadow = true` sends SHADOW: the server
decides and counts (INFO slidewin_checks_shadow_refused, SLIDEWIN.TOP) but
every request goes on; a request the limit would have refused gets the
header `RateLimit-Shadow: refused` and a log line at `notice` level.

Connections: one per request from nginx's pool (set_keepalive), returned to
the pool only after a complete reply (a reply, or an error reply, was read:
the connection is in a known state); on a socket error or timeout it is
closed, never pooled, and never used again.
]]

local redis_lib
do
    -- lua-nginx-redis (Debian) names it nginx.redis; OpenResty resty.redis.
    local ok, lib = pcall(require, "nginx.redis")
    if not ok then
        lib = require("resty.redis")
    end
    redis_lib = lib
end

local ngx = ngx
local _M = { _VERSION = "0.1.0" }

local DEFAULTS = {
    prefix = "rl:nginx:",
    key = "remote_addr",
    cost = 1,
    fail = "open", -- "open": let requests through when Redis is away; "closed": refuse them
    closed_status = 503,
    refused_status = 429,
    shadow = false,
    timeout_ms = 100,
    pool_size = 32,
    keepalive_ms = 60000,
    stats = "slidewin_stats", -- the lua_shared_dict counting outages and shadow refusals, if declared
}

-- Counts an event in the shared dict, when there is one.
local function count(opts, name)
    local dict = opts.stats and ngx.shared[opts.stats]
    if dict then
        dict:incr(name, 1, 0)
    end
end

-- The key of this request: "remote_addr", "header:Name", "var:name" or a
-- function returning a string. A missing header or variable falls back to
-- the client address, so a client cannot dodge the limit by leaving it out.
local function request_key(spec)
    local value
    if type(spec) == "function" then
        value = spec()
    elseif spec == "remote_addr" then
        value = ngx.var.remote_addr
    elseif type(spec) == "string" and spec:sub(1, 7) == "header:" then
        value = ngx.req.get_headers()[spec:sub(8)]
        if type(value) == "table" then
            value = value[1]
        end
    elseif type(spec) == "string" and spec:sub(1, 4) == "var:" then
        value = ngx.var[spec:sub(5)]
    end
    if value == nil or value == "" then
        value = ngx.var.remote_addr
    end
    return tostring(value)
end

local function ceil_seconds(ms)
    if ms <= 0 then
        return 0
    end
    return math.floor((ms + 999) / 1000)
end

local function set_headers(limit, remaining, reset_ms)
    ngx.header["RateLimit-Limit"] = limit
    ngx.header["RateLimit-Remaining"] = remaining
    ngx.header["RateLimit-Reset"] = ceil_seconds(reset_ms)
end

-- Calls SLIDEWIN.CHECK; returns the DETAIL array, or nil and why. The
-- connection goes back to the pool only after a complete reply.
local function call(opts, key)
    local red, err = redis_lib:new()
    if not red then
        return nil, "cannot make a socket: " .. tostring(err)
    end
    red:set_timeout(opts.timeout_ms)
    local r = opts.redis or {}
    local ok
    ok, err = red:connect(r.host or "127.0.0.1", r.port or 6379, {
        pool_size = opts.pool_size,
        pool = r.pool,
    })
    if not ok then
        -- Never connected: nothing to close or pool.
        return nil, "connect: " .. tostring(err)
    end
    if r.password and red:get_reused_times() == 0 then
        local res, aerr
        if r.username then
            res, aerr = red:auth(r.username, r.password)
        else
            res, aerr = red:auth(r.password)
        end
        if not res then
            red:close()
            return nil, "auth: " .. tostring(aerr)
        end
    end
    local args = { key, opts.limit, opts.window_ms }
    if opts.cost ~= 1 then
        args[#args + 1] = "COST"
        args[#args + 1] = opts.cost
    end
    args[#args + 1] = "DETAIL"
    if opts.shadow then
        args[#args + 1] = "SHADOW"
    end
    local res
    res, err = red["slidewin.check"](red, unpack(args))
    if res == nil then
        -- A socket error or timeout: the connection's state is unknown
        -- (a reply may still arrive), so it is closed, never pooled. (The
        -- library closes it itself on a read timeout; closing again is
        -- harmless and logs nothing.)
        red:close()
        return nil, "SLIDEWIN.CHECK: " .. tostring(err)
    end
    -- A whole reply was read (an error reply too): the connection is clean.
    red:set_keepalive(opts.keepalive_ms, opts.pool_size)
    if res == false or type(res) ~= "table" then
        return nil, "SLIDEWIN.CHECK replied: " .. tostring(err or res)
    end
    return res
end

--- Limits the current request (call it from access_by_lua*). Returns
--- whether the request may go on; a refused request has been answered.
function _M.limit(options)
    local opts = setmetatable(options or {}, { __index = DEFAULTS })
    assert(type(opts.limit) == "number" and type(opts.window_ms) == "number",
        "slidewin.nginx: limit and window_ms are required numbers")
    local key = opts.prefix .. request_key(opts.key)
    local d, err = call(opts, key)
    if not d then
        if opts.fail == "closed" then
            count(opts, "outage_closed")
            ngx.log(ngx.ERR, "slidewin: limiter unavailable, failing closed (", opts.closed_status, "): ", err)
            return ngx.exit(opts.closed_status)
        end
        count(opts, "outage_open")
        ngx.log(ngx.ERR, "slidewin: limiter unavailable, failing open: ", err)
        return true
    end
    -- [allowed, limit, remaining, retry_after_ms, reset_after_ms(, shadow_refused)]
    local allowed, limit, remaining, retry_ms, reset_ms = d[1], d[2], d[3], d[4], d[5]
    set_headers(limit, remaining, reset_ms)
    if opts.shadow and d[6] == 1 then
        count(opts, "shadow_refused")
        ngx.header["RateLimit-Shadow"] = "refused"
        ngx.log(ngx.NOTICE, "slidewin: shadow limit would refuse ", key,
            " (retry after ", retry_ms, " ms)")
    end
    if allowed == 1 then
        count(opts, "allowed")
        return true
    end
    count(opts, "refused")
    if retry_ms > 0 then
        ngx.header["Retry-After"] = ceil_seconds(retry_ms)
    end
    return ngx.exit(opts.refused_status)
end

--- The counters of the shared dict, as "name value" lines (for a status
--- location: content_by_lua_block { require("slidewin.nginx").status() }).
function _M.status(dict_name)
    local dict = ngx.shared[dict_name or DEFAULTS.stats]
    ngx.header["Content-Type"] = "text/plain"
    for _, name in ipairs({ "allowed", "refused", "shadow_refused", "outage_open", "outage_closed" }) do
        ngx.say("slidewin_nginx_", name, "_total ", dict and dict:get(name) or 0)
    end
end

return _M
