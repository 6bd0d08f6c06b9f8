//! Any text through run-spec evaluation: specs parsed, cases crossed and zipped, each case's
//! integer arguments, its kernel checked for them (computed compile-time values included), its
//! launch planned without data, the kernel's `#[requires(..)]` evaluated, bench cases listed.
//! Nothing may panic, hang or allocate without bound.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tile_lang::{check, spec, syntax};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(ast) = syntax::parse(text) else { return };
    let (specs, _) = spec::parse_specs(&ast);
    for s in specs.iter().take(4) {
        let _ = spec::bench_cases(s);
        let Ok(cases) = spec::cases(s) else { continue };
        for case in cases.iter().take(8) {
            let sizes = spec::case_sizes(s, case);
            let Some(def) = check::find_kernel(&ast, &s.kernel) else { continue };
            let _ = check::launch::computed_consts(def, &case.consts, &sizes);
            let Ok(k) = check::check_kernel_at(text, &ast, &s.kernel, &case.consts, &sizes) else {
                continue;
            };
            let _ = spec::plan(s, case, &k);
            let reqs = check::launch::requirements(def);
            let _ = check::launch::check_requirements(&reqs, &k.consts, &|n| sizes.get(n));
        }
    }
});
