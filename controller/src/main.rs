use std::process::ExitCode;

fn main() -> ExitCode {
    // Once, before any HTTP client exists: every client shares this provider.
    coxswain_steps::net::install_crypto_provider();
    coxswain::cli::main()
}
