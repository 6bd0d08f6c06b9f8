//! Any text through the whole pipeline every command and the JIT run: parse and file-level
//! checks, the static model's configuration, check, the e-graph rewriter, and codegen to PTX
//! for sm_90a (LLVM included), also as for an aligned launch (TMA, rings, producer warpgroups).
//! Errors are expected; nothing may panic, hang or blow up memory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tile_driver::{ConfigSource, OptOptions, Request, Source, Stage};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(src) = Source::parse("fuzz.tile", text) else { return };
    let target = tile_driver::target("sm_90a").unwrap();
    for name in src.kernel_names() {
        let req = Request {
            config: ConfigSource::Model(None),
            rewrite: Some(OptOptions::default()),
            ..Request::new(name, target.clone())
        };
        match tile_driver::compile(&src, &req, Stage::Ptx) {
            Err(e) => {
                let _ = src.render(&e);
            }
            // Again as for a launch with aligned buffers and integers multiples of 16: TMA
            // copies, rings and producer warpgroups only exist for such launches.
            Ok(c) => {
                let aligned = Request {
                    specialization: vec![tile_driver::ArgSpec::of_ptr(0); c.kernel().params.len()],
                    ..req
                };
                if let Err(e) = tile_driver::compile(&src, &aligned, Stage::Ptx) {
                    let _ = src.render(&e);
                }
            }
        }
    }
});
