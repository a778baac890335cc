//! `coxswain render`: fill one template the way an HTTP or message step would.

use std::{io::Write, path::PathBuf, process::ExitCode};

use coxswain_core::template::{self, Place};

/// Reads `--where`: the names are [`Place::ALL`]'s, listed in `--help`.
fn place_parser() -> impl clap::builder::TypedValueParser<Value = Place> {
    use clap::builder::TypedValueParser;
    let names: Vec<&'static str> = Place::ALL.iter().map(|&(n, _)| n).collect();
    clap::builder::PossibleValuesParser::new(names)
        .try_map(|name| Place::named(&name).ok_or_else(|| format!("unknown place {name}")))
}

/// Options of `coxswain render`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where the template stands: a URL (values percent-encoded), a header
    /// (a line break is refused), a JSON body (escaped inside quotes, JSON
    /// outside), or a query, form, text or message value (text).
    #[arg(long = "where", value_name = "PLACE", value_parser = place_parser())]
    place: Place,
    /// A JSON context file, as for `coxswain eval`.
    #[arg(long, value_name = "FILE")]
    context: Option<PathBuf>,
    /// The template, such as `https://api.example.com/items/{{fetch.json.id}}`.
    /// It may start with `-`: it is never read as an option.
    #[arg(allow_hyphen_values = true)]
    template: String,
}

/// Prints the rendered text exactly (no newline added). Exit 1 when a value
/// is missing or cannot go where it stands; 2 when the template is malformed.
pub fn run(args: Args) -> ExitCode {
    let context = match super::read_context("render", args.context.as_deref()) {
        Ok(context) => context,
        Err(code) => return code,
    };
    let place = args.place;
    let parsed = match template::parse(&args.template, place) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = parsed.check_json() {
        eprintln!("{e}");
        return ExitCode::from(2);
    }
    match parsed.render(&context) {
        Ok(text) => {
            let mut out = std::io::stdout().lock();
            if out
                .write_all(text.as_bytes())
                .and_then(|()| out.flush())
                .is_err()
            {
                return ExitCode::FAILURE;
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
