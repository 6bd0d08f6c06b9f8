//! Any text through `tilec verify --interpret`: run specs parsed, cases expanded, inputs
//! generated, kernels and in-file references run on the interpreter, outputs compared. Cases
//! whose sizes are large are skipped (their buffers are big, not wrong), and each run has a step
//! budget of 1e7 (under a second); everything else must end with a result or a diagnostic,
//! never a panic or a hang.
#![no_main]

use libfuzzer_sys::fuzz_target;

/// Sizes past this make a case slow on the interpreter, which is not what this target looks for.
const MAX_SIZE: i64 = 64;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let checked = tilec::check_source(text, &vec![]);
    if !checked.diags.is_empty() {
        return;
    }
    let small = checked.specs.iter().all(|s| {
        tile_lang::spec::cases(s).is_ok_and(|cases| {
            cases.len() <= 16 && cases.iter().all(|c| c.sizes.iter().all(|(_, v)| (0..=MAX_SIZE).contains(v)))
        })
    });
    if small {
        let opts = tilec::VerifyOptions {
            limits: tile_lang::interp::Limits { max_steps: 10_000_000 },
            ..Default::default()
        };
        let _ = tilec::verify(text, &opts);
    }
});
