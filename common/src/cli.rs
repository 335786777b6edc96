//! Command-line handling shared by the three binaries: they take their settings from the
//! environment, so the only arguments are `--help` and `--version`.

use crate::config::VARS;

/// What the command line asked for.
#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    /// Start the process.
    Run,
    /// Print help and exit 0.
    Help,
    /// Print the version and exit 0.
    Version,
    /// An argument nobody understands: print usage and exit 2.
    Unknown(String),
}

/// Reads the arguments (without the program name).
pub fn parse(args: impl IntoIterator<Item = String>) -> Command {
    match args.into_iter().next().as_deref() {
        None => Command::Run,
        Some("-h" | "--help") => Command::Help,
        Some("-V" | "--version") => Command::Version,
        Some(other) => Command::Unknown(other.to_owned()),
    }
}

/// Handles `--help`, `--version` and unknown arguments for binary `name`; returns only
/// when the process should start.
pub fn handle_args(name: &str, about: &str) {
    match parse(std::env::args().skip(1)) {
        Command::Run => {}
        Command::Help => {
            println!("{}", help_text(name, about));
            std::process::exit(0);
        }
        Command::Version => {
            println!("{name} {}", crate::VERSION);
            std::process::exit(0);
        }
        Command::Unknown(arg) => {
            eprintln!("{name}: unknown argument {arg:?}; try --help");
            std::process::exit(2);
        }
    }
}

/// The `--help` text: what the binary does and every environment variable it reads.
pub fn help_text(name: &str, about: &str) -> String {
    let mut text = format!(
        "{name} {} — {about}\n\nUsage: {name} [--help | --version]\n\nSettings come from environment variables:\n",
        crate::VERSION
    );
    for var in VARS {
        let default = if var.default.is_empty() {
            "(unset)"
        } else {
            var.default
        };
        text.push_str(&format!("  {:<30} {:<18} {}\n", var.name, default, var.help));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_recognised() {
        assert_eq!(parse(Vec::<String>::new()), Command::Run);
        assert_eq!(parse(vec!["--help".to_owned()]), Command::Help);
        assert_eq!(parse(vec!["-V".to_owned()]), Command::Version);
        assert_eq!(
            parse(vec!["--nope".to_owned()]),
            Command::Unknown("--nope".to_owned())
        );
    }

    #[test]
    fn help_lists_every_variable() {
        let help = help_text("probactr-test", "tests");
        for var in VARS {
            assert!(help.contains(var.name), "help misses {}", var.name);
        }
    }
}
