-- reaper_pass.lua: mark a reaper pass on its own (_pass.lua, prepended); reaper_tick.lua does the
-- same within the tick. Standalone (no prelude).
-- KEYS[1] rg:reaper:pass
-- ARGV[1] now ms
-- Returns {} or {from ms, to ms}: the window since the last pass, when Redis restarted in it

return mark_pass(KEYS[1], ARGV[1])
