//! The Run reconciler.
