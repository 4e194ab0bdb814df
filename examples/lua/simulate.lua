-- Run the seed story through the Lua module and print how many background
-- pods the AI work displaced (README.md, "Lua module").
local understory = require "understory"
local out = understory.simulate("examples/seed-story.json", { policies = "policies" })
print(out.summary.background_evictions)
