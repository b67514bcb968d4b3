--[[
slidewin's FUNCTION library as one EVAL script, for servers without FUNCTION
(Redis 6.x, services that expose EVAL/EVALSHA only). This file is only the
frame: the library itself, lua/slidewin.lua without its first line
(`#!lua name=slidewin`, which EVAL does not take), goes where the
`-- @LIBRARY@` line stands. scripts/eval-script.sh prints the result, make
dist ships it as slidewin-eval.lua, and the Python client builds the same
text (slidewin.eval_code()). The logic exists once, in lua/slidewin.lua.

  SCRIPT LOAD "$(scripts/eval-script.sh)"     -> sha
  EVALSHA sha numkeys key [key ...] function arg [arg ...]

with `function` one of the library's: slidewin_check, slidewin_peek,
slidewin_mcheck, slidewin_undo, slidewin_settle (slidewin_top answers its
error), and the
keys and arguments FCALL takes, e.g.

  EVALSHA sha 1 sms:limit:203.0.113.7 slidewin_check 5 60000 DETAIL

Replies, errors and keys are the library's (and so the module's). Two
differences, as a script keeps nothing between calls: the counter behind
wide member ids (used only when a short id is taken) starts again at every
call instead of living as long as the library (ids are still checked free
in every key before use); and so does the same-millisecond fence, so an
UNDO of a token followed by a new call in that millisecond may hand out
the same token again (docs/clients.md; charges made with ID are exact).
]]

-- The library registers its functions; here registering only records them,
-- under a local `redis` that reads everything else from the server's.
local slidewin_functions = {}
local redis = setmetatable({
    register_function = function(name, callback)
        if type(name) == 'table' then
            name, callback = name.function_name, name.callback
        end
        slidewin_functions[name] = callback
    end,
}, { __index = redis })

-- @LIBRARY@

local name = ARGV[1]
local callback = name and slidewin_functions[name]
if not callback then
    return redis.error_reply("ERR unknown slidewin function '" .. (name or '') ..
        "': the first argument after the keys names one (slidewin_check, slidewin_peek, slidewin_mcheck, slidewin_undo, slidewin_settle)")
end
local args = {}
for i = 2, #ARGV do
    args[i - 1] = ARGV[i]
end
return callback(KEYS, args)
