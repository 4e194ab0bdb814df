-- report_spec.lua — `understory simulate FILE --report out.html`: the page's
-- numbers are the JSON summary's, it is self-contained (no script, nothing
-- fetched) and holds every chart.  tests/cli/report.sh renders it in a
-- browser.
local H = require "tests.spec.helper"

local bin = os.getenv("UNDERSTORY") or "build/release/understory"

local function report(scenario)
  local path = os.tmpname()
  local ok = os.execute(string.format("'%s' simulate '%s' --report '%s' >/dev/null", bin, scenario, path))
  assert.is_true(ok == true or ok == 0, "simulate --report failed")
  local html = H.read(path)
  os.remove(path)
  return html
end

-- {pool = {figure = "text"}} from the summary table's rows.
local function figures(html)
  local rows = {}
  for pool, cells in html:gmatch('<tr data%-pool="([^"]*)">(.-)</tr>') do
    local t = {}
    for k, v in cells:gmatch('<td data%-figure="([%w_]+)">([^<]*)</td>') do t[k] = v end
    rows[pool] = t
  end
  return rows
end

local function same(json_value, text)
  if json_value == nil then return text == "-" end
  return math.abs(json_value - assert(tonumber(text), text)) < 0.0005
end

local function check_figures(html, out)
  local rows = figures(html)
  local function check(row, f)
    assert.is_truthy(row)
    for _, k in ipairs({ "capacity", "ai", "background", "idle" }) do
      assert.is_true(same(f.gpu_seconds[k], row[k]), k .. ": " .. tostring(row[k]))
    end
    assert.is_true(same(f.harvest_ratio, row.harvest_ratio), "harvest ratio " .. row.harvest_ratio)
    assert.are.equal(tostring(f.background_evictions), row.background_evictions)
    assert.are.equal(tostring(f.background_evictions_needed), row.background_evictions_needed)
    assert.are.equal(tostring(f.ai_wait_on_grace.pods), row.wait_pods)
    for _, k in ipairs({ "total", "p50", "p99" }) do
      assert.is_true(same(f.ai_wait_on_grace[k], row["wait_" .. k]), k)
    end
  end
  local h = out.summary.harvest
  check(rows["(all)"], h)
  for _, p in ipairs(h.pools) do check(rows[p.pool], p) end
  local n = 0
  for _ in pairs(rows) do n = n + 1 end
  assert.are.equal(#h.pools + 1, n)
end

describe("the HTML report", function()
  for _, f in ipairs({ "examples/seed-story.json", "examples/fragmented.json", "examples/reclaim.json" }) do
    it("prints the JSON summary's figures: " .. f, function()
      local html, out = report(f), H.run(f)
      check_figures(html, out)
      assert.is_truthy(html:find('data%-figure="cycles">' .. #out.cycles .. '<'))
      assert.is_truthy(html:find('data%-figure="reclaims">' .. out.summary.reclaims .. '<'))
    end)
  end

  it("is self-contained: no script, nothing fetched", function()
    local html = report("examples/seed-story.json")
    assert.is_nil(html:lower():find("<script", 1, true))
    assert.is_nil(html:find("https?://"))
    assert.is_nil(html:find(" src=", 1, true))
    assert.is_nil(html:find("url(", 1, true))
    assert.is_nil(html:find("<link", 1, true))
  end)

  it("has every chart: per pool use, evictions and pending; per queue; the node heat strip", function()
    local html = report("examples/seed-story.json")
    for _, id in ipairs({ "use-0", "evictions-0", "pending-0", "heat-0" }) do
      assert.is_truthy(html:find('id="' .. id .. '"', 1, true), id)
    end
    local charts = 0
    for _ in html:gmatch('<svg class="chart queue"') do charts = charts + 1 end
    assert.are.equal(#H.run("examples/seed-story.json").final.queues, charts)
    -- seed story: 17 backgroundpods evictions, in two cycles, shown as markers
    local markers = 0
    for _ in html:gmatch('data%-action="backgroundpods"') do markers = markers + 1 end
    assert.are.equal(2, markers)
    -- a heat row per node: n1..n4 labelled
    for _, n in ipairs({ "n1", "n2", "n3", "n4" }) do
      assert.is_truthy(html:find('text%-anchor="end">' .. n .. '</text>'), n)
    end
    assert.is_truthy(html:find('class="cell"', 1, true))
  end)

  it("shows one section per pool", function()
    local path = os.tmpname()
    local f = assert(io.open(path, "wb"))
    f:write([[{"name": "two pools", "cycle_interval": 10, "horizon": 20,
      "nodes": [{"name": "a1", "gpu": 2, "pool": "p1"}, {"name": "b1", "gpu": 2, "pool": "p2"}],
      "queues": [{"name": "ml", "resources": {"gpu": {"quota": 2}}}],
      "workloads": [{"name": "t", "queue": "ml", "pool": "p2", "requests": {"gpu": 1}}]}]])
    f:close()
    local html, out = report(path), H.run(path)
    os.remove(path)
    check_figures(html, out)
    assert.is_truthy(html:find('<section class="pool" data-pool="p1">', 1, true))
    assert.is_truthy(html:find('<section class="pool" data-pool="p2">', 1, true))
    assert.is_truthy(html:find('id="use-1"', 1, true))
  end)
end)
