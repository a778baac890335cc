-- Argo CD health of a Coxswain Flow.
-- Healthy: the controller validated this generation and it passed.
-- Degraded: validation found problems (each on a line: step, field, character),
--   or the flow is valid but its schedule cannot start runs.
-- Progressing: the controller has not checked this generation yet.
local hs = {}

local function condition(status, kind)
  if status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local status = obj.status
local generation = obj.metadata.generation
if status == nil or status.observedGeneration == nil or
    (generation ~= nil and status.observedGeneration < generation) then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller to validate this generation of the flow"
  return hs
end

local valid = condition(status, "Valid")
if valid == nil or valid.status == "Unknown" then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller to validate the flow"
  return hs
end
if valid.status ~= "True" then
  hs.status = "Degraded"
  hs.message = valid.message or "The flow did not pass validation"
  return hs
end

local ready = condition(status, "Ready")
if ready ~= nil and ready.status == "False" then
  hs.status = "Degraded"
  hs.message = ready.message or "Runs of this flow cannot start"
  return hs
end

hs.status = "Healthy"
hs.message = valid.message or "The flow passed validation"
return hs
