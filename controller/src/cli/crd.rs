//! `coxswain crd`: the CRDs, generated from the API types.

use std::{path::PathBuf, process::ExitCode};

use coxswain_core::crds;

/// Options of `coxswain crd`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Write one file per CRD into this directory instead of printing them.
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
}

/// Prints the CRDs as one YAML stream, or writes `DIR/<plural>.yaml`.
pub fn run(args: Args) -> ExitCode {
    let files = match crds::render_all() {
        Ok(files) => files,
        Err(e) => {
            eprintln!("coxswain crd: {e}");
            return ExitCode::FAILURE;
        }
    };
    match args.out_dir {
        None => {
            let stream: Vec<&str> = files.iter().map(|(_, yaml)| yaml.as_str()).collect();
            print!("{}", stream.join("---\n"));
        }
        Some(dir) => return super::write_files("crd", &dir, &files),
    }
    ExitCode::SUCCESS
}
