//! Any byte string through the whole front end: parse, check every kernel, parse run specs,
//! render diagnostics. Nothing may panic, hang, or overflow the stack.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tile_lang::{check, diag, spec, syntax};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match syntax::parse(text) {
        Err(d) => {
            let _ = diag::render("fuzz.tile", text, &d);
        }
        Ok(ast) => {
            let _ = ast.to_string();
            let (kernels, diags) = check::check_file(text, &ast, &vec![]);
            let _ = diag::render("fuzz.tile", text, &diags);
            for k in &kernels {
                let printed = k.to_string();
                let back = tile_lang::ir::parse_kernel(&printed).expect("checked IR prints to parseable text");
                // Compared as text: a NaN constant is not equal to itself.
                assert_eq!(back.to_string(), printed);
            }
            let _ = spec::parse_specs(&ast);
        }
    }
});
