//! Snapshot tests of this application's kernels, as a team would keep them: the configuration
//! the JIT launches, ptxas's resource report and the normalised PTX, for the constants and target
//! the application uses (`tile_jit::jit_snapshot`; `cargo insta review` after a change).

use tile_jit::{ArgSpec, ConstValue, DType, SnapshotOptions, Source, jit_snapshot};

tile_jit::kernels!(mod norm = "../rmsnorm.tile");
// Keywords and the launcher's own argument names as .tile names: generating compiles.
tile_jit::kernels!(mod names = "tests/names.tile");

#[test]
fn launchers_carry_every_name() {
    // The types exist with the .tile names; nothing here needs a GPU.
    let _: fn(&names::Match<f32>) -> &tile_jit::JitKernel = names::Match::<f32>::kernel;
    let _ = names::R2dConsts { FLAG: Some(true) };
    let _ = names::MatchConsts { BLOCK: Some(512) };
}

#[test]
fn rmsnorm_bf16_on_hopper() {
    // ptxas's report needs ptxas (tests/setup.sh installs it).
    if tile_jit::JitOptions::default().ptxas.is_none() {
        eprintln!("skipped: no ptxas");
        return;
    }
    let opts = SnapshotOptions {
        // What a launch with 16-byte-aligned buffers and n = stride = 4096 specialises on.
        specialization: vec![
            ArgSpec::of_ptr(0),
            ArgSpec::of_ptr(0),
            ArgSpec::of_ptr(0),
            ArgSpec::of_int(1000),
            ArgSpec::of_int(4096),
            ArgSpec::of_int(4096),
            ArgSpec::default(),
        ],
        ..SnapshotOptions::new(tile_jit::target("sm_90a").unwrap())
    };
    let bindings = [
        ("T", ConstValue::DType(DType::BF16)),
        ("ROWS", ConstValue::Int(4)),
        ("BLOCK", ConstValue::Int(4096)),
    ];
    let text = jit_snapshot(Source::Static(norm::SOURCE), "rmsnorm", &bindings, &opts).unwrap();
    insta::assert_snapshot!("rmsnorm_bf16_sm90a", text);
}
