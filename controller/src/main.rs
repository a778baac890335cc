use std::process::ExitCode;

fn main() -> ExitCode {
    coxswain::cli::main()
}
