-- drive.lua — feeds a scenario document to an engine object of the Lua
-- module the way the simulator drives it: nodes, queues (parents first),
-- workloads at their submit times with their pre-existing pods, the
-- timeline, completions after their durations, reloads last; one cycle
-- every cycle_interval up to the horizon.  Used by tests/embed/replay.lua
-- (tests/cli/embed-equivalence.sh) and the busted specs.
--
--   dofile("tests/embed/drive.lua")(e, doc, path, function(t, r) ... end)
--
-- doc is the decoded scenario (its workload objects are changed: the
-- simulator's own fields are taken out); path is where it was read from
-- (relative policy directories of reloads are under it); the function is
-- called after each cycle with its time and run_cycle's result.
return function(e, doc, path, each_cycle)
  assert(doc.horizon, "the replay needs a horizon")
  local nodes = {}
  for _, n in ipairs(doc.nodes or {}) do
    e:upsert_node(n)
    nodes[n.name] = n
  end

  -- parents first: a queue may name a parent that comes later
  local queues, added, have = doc.queues or {}, {}, {}
  repeat
    local progress = false
    for i, q in ipairs(queues) do
      if not added[i] and (q.parent == nil or have[q.parent]) then
        e:upsert_queue(q)
        added[i], have[q.name], progress = true, true, true
      end
    end
  until not progress
  for i in ipairs(queues) do assert(added[i], "queue parents make a cycle") end

  -- workloads in the simulator's order: the file's, then timeline submits
  local wls, by_name = {}, {}
  local function add_wl(obj, at)
    local w = { obj = obj, name = obj.name, submit_at = at or obj.submit_at or 0,
                duration = obj.duration or -1, pods = obj.pods, state = "waiting" }
    obj.submit_at, obj.duration, obj.pods = nil, nil, nil
    wls[#wls + 1] = w
    by_name[w.name] = w
  end
  for _, w in ipairs(doc.workloads or {}) do add_wl(w) end
  local timeline = {}
  for i, t in ipairs(doc.timeline or {}) do
    timeline[#timeline + 1] = { entry = t, order = i }
    if t.action == "submit" and type(t.workload) == "table" then add_wl(t.workload, t.at) end
  end
  table.sort(timeline, function(a, b)
    if a.entry.at ~= b.entry.at then return a.entry.at < b.entry.at end
    return a.order < b.order
  end)
  for _, t in ipairs(timeline) do
    if t.entry.action == "submit" and type(t.entry.workload) == "string" then
      by_name[t.entry.workload].submit_at = t.entry.at
    end
  end

  local function submit(w, t)
    e:upsert_workload(w.obj, t)
    w.state = "active"
    for i, p in ipairs(w.pods or {}) do
      local name = p.name
      if not name then
        name = w.obj.controller == "daemonset" and (w.name .. "-" .. p.node)
               or (w.name .. "-" .. (i - 1))
      end
      e:upsert_pod { name = name, workload = w.name, node = p.node }
    end
  end

  local function running_since(name)
    for _, w in ipairs(e:workloads()) do
      if w.name == name and w.state == "active" then return w.running_since end
    end
  end

  local next_tl = 1
  for c = 0, 999 do
    local t = c * (doc.cycle_interval or 10)
    if t > doc.horizon then break end
    local first = next_tl
    while next_tl <= #timeline and timeline[next_tl].entry.at <= t do
      local en = timeline[next_tl].entry
      local a = en.action
      if a == "delete" or a == "complete" then
        local w = by_name[en.workload]
        if w.state == "active" then
          if a == "delete" then e:remove_workload(w.name, t) else e:complete_workload(w.name, t) end
          w.state = "finished"
        elseif w.state == "waiting" and a == "delete" then
          w.state = "finished"
        end
      elseif a == "add_node" then
        e:upsert_node(en.node)
        nodes[en.node.name] = en.node
      elseif a == "remove_node" then
        e:remove_node(en.node)
      elseif a == "cordon" or a == "uncordon" then
        local n = nodes[en.node]
        n.unschedulable = a == "cordon"
        e:upsert_node(n)
      end
      next_tl = next_tl + 1
    end
    for _, w in ipairs(wls) do
      if w.state == "waiting" and w.submit_at <= t then
        submit(w, t)
      elseif w.state == "active" and w.duration >= 0 then
        local since = running_since(w.name)
        if since and since + w.duration <= t then
          e:complete_workload(w.name, t)
          w.state = "finished"
        end
      end
    end
    -- reloads last, as the simulator does: their dry run sees the state this
    -- cycle starts from
    for i = first, next_tl - 1 do
      local en = timeline[i].entry
      if en.action == "reload_policies" then
        local dir = en.dir
        if dir:sub(1, 1) ~= "/" and path:find("/") then dir = path:match("^(.*)/") .. "/" .. dir end
        pcall(e.reload_policies, e, dir) -- refused: the old policies stay
      end
    end
    each_cycle(t, e:run_cycle(t))
  end
end
