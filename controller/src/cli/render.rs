//! `coxswain render`: fill one template the way an HTTP or message step would.

use std::{io::Write, path::PathBuf, process::ExitCode};

use crate::template::{self, Place};

/// Where a template stands, which decides how values are inserted.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum Where {
    /// A URL: values are percent-encoded.
    Url,
    /// A header value: text; a line break is refused.
    Header,
    /// A JSON body: escaped inside quotes, JSON outside.
    Json,
    /// A query parameter value: text.
    Query,
    /// A form field value: text.
    Form,
    /// A text body: text.
    Text,
    /// A chat message: text.
    Message,
}

impl From<Where> for Place {
    fn from(w: Where) -> Place {
        match w {
            Where::Url => Place::Url,
            Where::Header => Place::Header,
            Where::Json => Place::Json,
            Where::Query => Place::Query,
            Where::Form => Place::Form,
            Where::Text => Place::Text,
            Where::Message => Place::Message,
        }
    }
}

/// Options of `coxswain render`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where the template stands.
    #[arg(long = "where", value_enum, value_name = "PLACE")]
    place: Where,
    /// A JSON context file, as for `coxswain eval`.
    #[arg(long, value_name = "FILE")]
    context: Option<PathBuf>,
    /// The template, such as `https://api.example.com/items/{{fetch.json.id}}`.
    template: String,
}

/// Prints the rendered text exactly (no newline added). Exit 1 when a value
/// is missing or cannot go where it stands; 2 when the template is malformed.
pub fn run(args: Args) -> ExitCode {
    let context = match super::read_context(args.context.as_deref()) {
        Ok(context) => context,
        Err(message) => {
            eprintln!("coxswain render: {message}");
            return ExitCode::from(2);
        }
    };
    let place = Place::from(args.place);
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
