use std::io::IsTerminal;

use tile_lang::codespan_reporting::term::termcolor::{ColorChoice, StandardStream};

fn main() {
    // Arguments are read as OsStrings: one that is not UTF-8 is a usage error, not a panic.
    let mut args = Vec::new();
    for (i, a) in std::env::args_os().enumerate() {
        match a.into_string() {
            Ok(s) => args.push(s),
            Err(a) => {
                eprintln!("error: argument {i} is not UTF-8 text: {}", a.to_string_lossy());
                std::process::exit(2);
            }
        }
    }
    // Checking recurses over the syntax tree; a large stack keeps deep (but legal) nesting safe.
    let worker = std::thread::Builder::new().stack_size(256 << 20).spawn(move || {
        let color = if std::io::stderr().is_terminal() {
            ColorChoice::Auto
        } else {
            ColorChoice::Never
        };
        let mut err = StandardStream::stderr(color);
        let mut out = std::io::stdout().lock();
        tilec::run(&args, &mut out, &mut err)
    });
    let code = match worker.map(|h| h.join()) {
        Ok(Ok(code)) => code,
        _ => {
            eprintln!("error: tilec failed internally; please report this with the input that caused it");
            3
        }
    };
    std::process::exit(code);
}
