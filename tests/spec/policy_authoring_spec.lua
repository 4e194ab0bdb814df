-- policy_authoring_spec.lua — writing a policy without copying the defaults:
-- a directory holds only the files it changes, helpers come from its own
-- directory with require (nothing outside it), and log(...) lines reach the
-- output with cycle, file and line, bounded.
local H = require "tests.spec.helper"

local function dir_with(files)
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p '" .. dir .. "'"))
  for name, text in pairs(files) do
    local f = assert(io.open(dir .. "/" .. name, "wb"))
    f:write(text)
    f:close()
  end
  return dir
end

local seed = "examples/seed-story.json"

describe("policy authoring", function()

  it("a directory holding only placement.lua runs the defaults for the rest: same id, same run", function()
    local spread = H.read("examples/policies/spread/placement.lua")
    local partial = dir_with({ ["placement.lua"] = spread })
    local full = H.policy_dir({ ["placement.lua"] = spread })
    local a, b = H.run(seed, { policies = partial }), H.run(seed, { policies = full })
    H.remove_dir(partial)
    H.remove_dir(full)
    -- the id hashes the three files' bytes: the defaults filled in are the defaults'
    assert.are.equal(b.policy, a.policy)
    assert.are.same(b, a)
    -- and spread differs from the defaults, so the run did use placement.lua
    assert.are_not.equal(H.run(seed).policy, a.policy)
  end)

  it("the examples hold only what they change", function()
    for _, ex in ipairs({ { "spread", "placement.lua" }, { "drf", "fairshare.lua" } }) do
      local p = io.popen("ls examples/policies/" .. ex[1])
      local files = p:read("a")
      p:close()
      assert.are.equal(ex[2] .. "\n", files)
      local out = H.run("examples/policy-diff.json", { policies = "examples/policies/" .. ex[1] })
      assert.are.equal(0, #H.events(out, function(e) return e.reason:match("^Policy") end))
    end
  end)

  it("a directory with none of the files is refused, naming it", function()
    local empty = dir_with({ ["notes.txt"] = "x" })
    local ok, err = pcall(H.run, seed, { policies = empty })
    H.remove_dir(empty)
    assert.is_false(ok)
    assert.matches("holds none of fairshare.lua, placement.lua, background.lua", err, 1, true)
  end)

  it("require loads a helper from the policy's own directory, once, as part of the policy id", function()
    local placement = "local h = require 'pick'\nlocal again = require 'pick'\n" ..
                      "assert(h == again)\nreturn { score = h.score }\n"
    local a = dir_with({ ["placement.lua"] = placement,
                         ["pick.lua"] = "return { score = function(p, n) return n.free_gpus end }\n" })
    local b = dir_with({ ["placement.lua"] = placement,
                         ["pick.lua"] = "return { score = function(p, n) return -n.free_gpus end }\n" })
    local oa, ob = H.run(seed, { policies = a }), H.run(seed, { policies = b })
    H.remove_dir(a)
    H.remove_dir(b)
    assert.are_not.equal(oa.policy, ob.policy)
    assert.are.equal(0, #H.events(oa, function(e) return e.reason:match("^Policy") end))
    assert.are_not.same(H.ai_placements(oa, { "eval-b" }), H.ai_placements(ob, { "eval-b" }))
  end)

  it("require reaches nothing outside the directory, and names what went wrong", function()
    for name, want in pairs({
      ["../fairshare"] = 'not a module name',
      ["/etc/passwd"] = 'not a module name',
      ["os"] = 'no os.lua in the policy directory',
      ["loop"] = 'a require loop',
    }) do
      local dir = dir_with({ ["placement.lua"] = "local x = require '" .. name .. "'\nreturn { score = function() return 0 end }\n",
                             ["loop.lua"] = "return require 'loop'\n" })
      local ok, err = pcall(H.run, seed, { policies = dir })
      H.remove_dir(dir)
      assert.is_false(ok, name)
      assert.matches(want, err, 1, true)
    end
  end)

  it("log lines show with cycle, file and line in the JSON, bounded", function()
    local dir = dir_with({
      ["placement.lua"] = "log('placement', 'loaded', 42)\n" ..
                          "return { score = function(pod, node)\n" ..
                          "  if pod.name == 'train-1-0' then log('scored', pod.name, node.name) end\n" ..
                          "  return 0 end }\n",
      ["background.lua"] = "local d = require 'default_bg'\n" ..
                           "return { reoffer = function(view)\n" ..
                           "  for i = 1, 300 do log('line', i) end\n" ..
                           "  return d.reoffer(view) end }\n",
      ["default_bg.lua"] = H.read("policies/background.lua"),
    })
    local out = H.run(seed, { policies = dir })
    H.remove_dir(dir)
    local first = out.cycles[1].log
    assert.are.same({ file = "placement.lua", line = 1, message = "placement loaded 42" }, first[1])
    -- background.lua logs 300 lines a call: 200 are kept, the rest counted
    assert.are.equal(200, #first)
    assert.is_true(out.cycles[1].log_dropped >= 101)
    local scored = 0
    for _, c in ipairs(out.cycles) do
      for _, l in ipairs(c.log or {}) do
        if l.message:match("^scored train%-1%-0 n%d$") then
          scored = scored + 1
          assert.are.equal(30, c.time) -- train-1 arrives at t=30
          assert.are.same({ "placement.lua", 3 }, { l.file, l.line })
        end
      end
    end
    assert.is_true(scored >= 1)
  end)

  it("log lines reach an embedder: the engine's run_cycle returns them", function()
    local dir = dir_with({ ["placement.lua"] =
      "return { score = function(pod, node)\n  log('score', pod.name, node.name)\n  return 0 end }\n" })
    local e <close> = H.understory.engine({ policies = dir })
    e:upsert_node(H.node("n1"))
    e:upsert_queue(H.queue("team", 8))
    e:upsert_workload({ name = "w", queue = "team", requests = { gpu = 1 } }, 0)
    local r = e:run_cycle(0)
    H.remove_dir(dir)
    assert.are.same({ { file = "placement.lua", line = 2, message = "score w-0 n1" } }, r.log)
    assert.are.same({}, e:run_cycle(10).log)
  end)
end)
