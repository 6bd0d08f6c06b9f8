use std::io::IsTerminal;

use tile_lang::codespan_reporting::term::termcolor::{ColorChoice, StandardStream};

fn main() {
    let args: Vec<String> = std::env::args().collect();
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
