//! Large values moved out of a Run's status into ConfigMaps the Run owns, so
//! a Run stays within its size budget however long its outputs and loops.
//!
//! The reconciler reads a Run with [`Offloader::load`] (the status with
//! every value back in place), hands the status it wants written to
//! [`Offloader::store`] (which creates the ConfigMaps the status needs and
//! returns the status to write), writes that status, and then calls
//! [`Offloader::collect`] to delete the value ConfigMaps no status
//! references any more. What moves and how it is referenced is the pure
//! `coxswain_core::api::offload`; this module only keeps the pieces.
//!
//! Each ConfigMap holds one piece (at most
//! [`PIECE_BYTES`](coxswain_core::api::offload::PIECE_BYTES)) of a value's
//! compact JSON under the key `value`, is immutable, owned by the Run and
//! labelled with the Run's uid and `coxswain.dev/role: value`. Its name
//! comes from the value's digest, so storing the same record twice creates
//! nothing the second time.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use coxswain_kube::values::config_map::{self, Owner};
use coxswain_kube::values::{Values, unique};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::Value;

use crate::{Error, StartError, ValueError, names};
use coxswain_core::api::offload::{self, DEFAULT_BUDGET, DEFAULT_THRESHOLD, Limits, MIN_THRESHOLD};
use coxswain_core::api::{Run, RunStatus};

/// When values leave a Run's status.
#[derive(clap::Args, Debug, Clone)]
pub struct OffloadSettings {
    /// A value (output, text, reviewed work, error message) whose JSON is
    /// larger than this many bytes moves out of the Run's status into a
    /// ConfigMap the Run owns, leaving a preview; at least 1024.
    #[arg(
        long = "offload-threshold",
        env = "COXSWAIN_OFFLOAD_THRESHOLD",
        value_name = "BYTES",
        default_value_t = DEFAULT_THRESHOLD,
        value_parser = parse_threshold
    )]
    pub threshold: usize,
    /// The size a Run's status should stay under: while it is larger, its
    /// largest remaining values move out too.
    #[arg(
        long = "status-budget",
        env = "COXSWAIN_STATUS_BUDGET",
        value_name = "BYTES",
        default_value_t = DEFAULT_BUDGET
    )]
    pub budget: usize,
}

impl Default for OffloadSettings {
    fn default() -> Self {
        OffloadSettings {
            threshold: DEFAULT_THRESHOLD,
            budget: DEFAULT_BUDGET,
        }
    }
}

impl OffloadSettings {
    /// The settings as the pure splitter takes them.
    pub fn limits(&self) -> Result<Limits, offload::OffloadError> {
        Limits::new(self.threshold, self.budget)
    }
}

fn parse_threshold(text: &str) -> Result<usize, String> {
    let n: usize = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of bytes"))?;
    if n < MIN_THRESHOLD {
        return Err(format!(
            "{n} bytes is too small: a moved value leaves a preview of a few hundred bytes, \
             so the threshold must be at least {MIN_THRESHOLD}"
        ));
    }
    Ok(n)
}

/// What [`Offloader::store`] made of a status.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    /// The status to write: previews in place of moved values, and
    /// `values` listing where each went.
    pub status: Value,
    /// Its size as compact JSON, in bytes.
    pub bytes: usize,
    /// Whether it is still over the budget once every value that could
    /// move has moved (a warning is logged; the status is written anyway).
    pub over_budget: bool,
    /// ConfigMaps this call created (0 when they all existed).
    pub created: usize,
}

/// Moves values between Runs' statuses and their ConfigMaps. Holds a cache
/// of the ConfigMaps it read or wrote; share one for the whole controller.
pub struct Offloader {
    values: Values,
    limits: Limits,
}

impl Offloader {
    /// An offloader with `settings`; refuses a threshold below the minimum.
    pub fn new(client: Client, settings: &OffloadSettings) -> Result<Self, StartError> {
        let limits = settings
            .limits()
            .map_err(|e| StartError::Setting(format!("the controller's settings: {e}")))?;
        Ok(Offloader {
            values: Values::new(client),
            limits,
        })
    }

    /// The status to write for `status`: its large values moved into
    /// ConfigMaps owned by `run`, which exist when this returns.
    pub async fn store(&self, run: &Run, status: &RunStatus) -> Result<Stored, Error> {
        let owner = Owner::of(run)?;
        let stored = serde_json::to_value(status)
            .map_err(|e| Error::Corrupt(format!("the status of run {}: {e}", owner.id())))?;
        let split = offload::split(stored, &self.limits, &|sha, piece| {
            names::value(&owner.name, sha, piece)
        })
        .map_err(|source| Error::from(owner.error(source)))?;
        let moved = split
            .moved()
            .map_err(|source| Error::from(owner.error(source)))?;
        let created = self
            .keep(&owner, names::ROLE_VALUE, moved, &split.contents)
            .await?;
        if split.over_budget() {
            tracing::warn!(
                run = %owner.id(),
                bytes = split.bytes,
                budget = split.budget,
                "the status is over its budget with every large value moved out"
            );
        }
        Ok(Stored {
            bytes: split.bytes,
            over_budget: split.over_budget(),
            status: split.status,
            created,
        })
    }

    /// What an Approval of `run` shows (`spec.show`), with each value over
    /// the threshold moved into ConfigMaps the Run owns (labelled
    /// `coxswain.dev/role: shown`, which [`Offloader::collect`] leaves
    /// alone) and replaced by a preview naming them.
    pub async fn store_shown(
        &self,
        run: &Run,
        show: &BTreeMap<String, Value>,
    ) -> Result<Value, Error> {
        let owner = Owner::of(run)?;
        let shown = offload::split_shown(show, &self.limits, &|sha, piece| {
            names::shown(&owner.name, sha, piece)
        });
        self.keep(&owner, names::ROLE_SHOWN, shown.moved, &shown.contents)
            .await?;
        Ok(shown.show)
    }

    /// Makes sure every piece of `moved` has its ConfigMap; returns how
    /// many it created.
    async fn keep(
        &self,
        owner: &Owner,
        role: &str,
        moved: Vec<offload::MovedValue>,
        contents: &BTreeMap<String, String>,
    ) -> Result<usize, Error> {
        let mut created = 0;
        for entry in unique(moved) {
            let content = contents.get(&entry.sha256).ok_or_else(|| {
                Error::Corrupt(format!(
                    "the value at {} of run {} has no content to keep",
                    entry.path,
                    owner.id()
                ))
            })?;
            for (name, piece) in entry.config_maps.iter().zip(offload::pieces(content)) {
                if self.values.cache().get(name).is_none() {
                    let object = owner.config_map(role, &entry, name, piece);
                    let made = self.create(owner, &entry, object).await?;
                    if !made {
                        self.check_piece(owner, &entry, name, piece).await?;
                    }
                    created += usize::from(made);
                    self.values.cache().put(name, Arc::from(piece));
                }
            }
        }
        Ok(created)
    }

    /// The status of `run` with every moved value put back.
    pub async fn load(&self, run: &Run) -> Result<RunStatus, Error> {
        Ok(self.values.load(run).await?)
    }

    /// Deletes `run`'s value ConfigMaps that `written` (the status just
    /// written) does not reference; returns how many it deleted.
    pub async fn collect(&self, run: &Run, written: &Value) -> Result<usize, Error> {
        let owner = Owner::of(run)?;
        let keep: BTreeSet<String> = offload::moved(written)
            .map_err(|source| Error::from(owner.error(source)))?
            .into_iter()
            .flat_map(|m| m.config_maps)
            .collect();
        let api = self.values.api(&owner);
        let selector = format!(
            "{}={},{}={}",
            names::RUN_UID_LABEL,
            owner.uid,
            names::ROLE_LABEL,
            names::ROLE_VALUE
        );
        let list = api
            .list_metadata(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| {
                Error::kube(
                    format!("listing the value ConfigMaps of run {}", owner.id()),
                    e,
                )
            })?;
        let mut deleted = 0;
        for name in list.items.iter().map(|cm| cm.name_any()) {
            if keep.contains(&name) {
                continue;
            }
            self.values.cache().forget(&name);
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => deleted += 1,
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(e) => {
                    return Err(Error::kube(
                        format!("deleting ConfigMap {name} of run {}", owner.id()),
                        e,
                    ));
                }
            }
        }
        Ok(deleted)
    }

    /// Creates one piece's ConfigMap; false when it already existed (its
    /// name is its content's digest, so it holds the same piece).
    async fn create(
        &self,
        owner: &Owner,
        entry: &offload::MovedValue,
        object: ConfigMap,
    ) -> Result<bool, Error> {
        let name = object.name_any();
        match self
            .values
            .api(owner)
            .create(&PostParams::default(), &object)
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(e) => Err(Error::kube(
                format!(
                    "creating ConfigMap {name} for the value at {} of run {}",
                    entry.path,
                    owner.id()
                ),
                e,
            )),
        }
    }

    /// Checks that the ConfigMap found under a piece's name holds that
    /// piece: the name follows from the value's digest, so anyone who can
    /// guess a value can make a ConfigMap under its name first.
    async fn check_piece(
        &self,
        owner: &Owner,
        entry: &offload::MovedValue,
        name: &str,
        piece: &str,
    ) -> Result<(), Error> {
        let found = self
            .values
            .api(owner)
            .get_opt(name)
            .await
            .map_err(|e| Error::kube(format!("reading ConfigMap {name}"), e))?;
        let Some(found) = found else { return Ok(()) };
        if config_map::piece_of(found).as_deref() == Some(piece) {
            return Ok(());
        }
        Err(ValueError::Tampered {
            object: format!("ConfigMap {name}"),
            reason: format!(
                "the ConfigMap {name} stands where a piece of the value at {} of run {} goes but holds something else; Coxswain did not write it (it was left alone)",
                entry.path,
                owner.id()
            ),
        }
        .into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        offload: OffloadSettings,
    }

    #[test]
    fn settings_default_and_refuse_a_tiny_threshold() {
        let cli = Cli::try_parse_from(["x"]).expect("defaults");
        assert_eq!(cli.offload.threshold, DEFAULT_THRESHOLD);
        assert_eq!(cli.offload.budget, DEFAULT_BUDGET);
        let err = Cli::try_parse_from(["x", "--offload-threshold", "100"])
            .err()
            .expect("too small");
        assert!(err.to_string().contains("at least 1024"), "{err}");
    }
}
