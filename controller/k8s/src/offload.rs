//! Large values moved out of the Run's status into owned ConfigMaps, so a
//! Run stays within its size budget. (Being built: see the "offload" work item.)

/// When values leave the status.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct OffloadSettings {}
