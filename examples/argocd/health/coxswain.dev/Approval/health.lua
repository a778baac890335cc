-- Argo CD health of a Coxswain Approval (a person's part of a Run).
-- Suspended: nobody has answered yet; the run waits.
-- Healthy: answered (the run has taken the answer in, or is about to).
-- Healthy too when closed: the run ended first and no answer is needed.
-- Degraded: the answer written was refused (it does not fit the step);
--   the person may write another.
local hs = {}

local spec = obj.spec
local status = obj.status
local consumed = status ~= nil and status.consumed == true
local refused = nil
local closed = nil
if status ~= nil then
  refused = status.refused
  closed = status.closed
end

-- What was answered: the decision the run took in and who took it (on a
-- step of several approvers, all who agreed), else what the person wrote.
local function answer()
  local text = "an entry"
  local by = nil
  if status ~= nil and status.decision ~= nil then
    text = status.decision
  elseif spec.decision ~= nil then
    text = spec.decision
  end
  if status ~= nil and status.decidedBy ~= nil then
    by = status.decidedBy
  elseif spec.decidedBy ~= nil and spec.decidedBy.username ~= nil then
    by = spec.decidedBy.username
  end
  if by ~= nil then
    text = text .. " by " .. by
  end
  return text
end

if consumed then
  hs.status = "Healthy"
  hs.message = "Answered " .. answer() .. "; the run took it in"
  return hs
end
if closed ~= nil then
  hs.status = "Healthy"
  hs.message = "Closed: " .. closed
  return hs
end
if refused ~= nil then
  hs.status = "Degraded"
  hs.message = "The answer was refused: " .. refused
  return hs
end
if spec.decision ~= nil or spec.response ~= nil then
  hs.status = "Healthy"
  hs.message = "Answered " .. answer() .. "; waiting for the run to take it in"
  return hs
end

hs.status = "Suspended"
-- On a step of several approvers, how far their answers got.
local tally = ""
if status ~= nil and status.tally ~= nil then
  tally = " (" .. status.tally .. ")"
end
if spec.mode == "entry" then
  local names = {}
  if spec.fields ~= nil then
    for _, field in ipairs(spec.fields) do
      table.insert(names, field.name)
    end
  end
  hs.message = "Waiting for a person to fill in (" .. table.concat(names, ", ") ..
    ") on step " .. spec.step .. " of run " .. spec.run
elseif spec.decisions ~= nil then
  hs.message = "Waiting for a person to decide (" .. table.concat(spec.decisions, ", ") ..
    ") on step " .. spec.step .. " of run " .. spec.run .. tally
else
  hs.message = "Waiting for a person to decide on step " .. spec.step .. " of run " .. spec.run
end
return hs
