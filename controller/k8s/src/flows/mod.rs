//! The Flow reconciler: a Flow's `Valid` condition and its schedule.
//! (Being built: see the "flows" work item.)
