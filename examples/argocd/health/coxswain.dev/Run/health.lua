-- Argo CD health of a Coxswain Run.
-- Progressing: Pending (not started, or its Flow is missing) or Running.
-- Suspended: Waiting, nothing runs until a person answers an Approval.
-- Healthy: Succeeded.
-- Degraded: Failed or Cancelled, with the run's error.
local hs = {}

local function progress(status)
  if status.progress ~= nil then
    return " (" .. status.progress .. " steps settled)"
  end
  return ""
end

local function at_step(status)
  if status.currentStep ~= nil then
    return " at step " .. status.currentStep
  end
  return ""
end

local status = obj.status
local phase = ""
if status ~= nil and status.phase ~= nil then
  phase = status.phase
end

if phase == "Succeeded" then
  hs.status = "Healthy"
  hs.message = "The run succeeded" .. progress(status)
  return hs
end
if phase == "Failed" or phase == "Cancelled" then
  hs.status = "Degraded"
  if status.error ~= nil and status.error.message ~= nil then
    hs.message = status.error.message
  else
    hs.message = "The run ended " .. phase
  end
  return hs
end

if phase == "" or phase == "Pending" then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller to start the run"
  if status ~= nil and status.conditions ~= nil then
    for _, c in ipairs(status.conditions) do
      if c.type == "Running" and c.status == "False" and c.message ~= nil and c.message ~= "" then
        hs.message = c.message
      end
    end
  end
  return hs
end

local generation = obj.metadata.generation
if generation ~= nil and status.observedGeneration ~= nil and status.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller to take in the run's change (such as a cancel)"
  return hs
end
if phase == "Running" then
  hs.status = "Progressing"
  hs.message = "Running" .. at_step(status) .. progress(status)
  return hs
end
if phase == "Waiting" then
  hs.status = "Suspended"
  hs.message = "Waiting for a person" .. at_step(status) .. progress(status) ..
    "; answer its Approval (kubectl get approvals)"
  return hs
end

hs.status = "Unknown"
hs.message = "Unknown run phase " .. phase
return hs
