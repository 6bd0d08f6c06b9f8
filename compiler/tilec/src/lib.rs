//! `tilec`: check, compile and verify `.tile` kernels.
//!
//! The binary is a thin shell over [`run`], which tests call directly with in-memory writers.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Parser, Subcommand, ValueEnum};
use tile_lang::check::{self, Bindings};
use tile_lang::codespan_reporting::term::termcolor::WriteColor;
use tile_lang::diag::{self, Diagnostic};
use tile_lang::interp;
use tile_lang::ir::{ConstValue, DType, Kernel};
use tile_lang::spec::{self, Case, RunSpec};
use tile_lang::syntax;

#[derive(Parser, Debug)]
#[command(name = "tilec", version, about = "The tile kernel compiler")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Parse and type-check files; exit 0 when clean, 1 with diagnostics.
    Check {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Bind a compile-time parameter (repeatable): -D BLOCK=1024, -D T=bf16.
        #[arg(short = 'D', value_name = "NAME=VALUE")]
        defines: Vec<String>,
    },
    /// Compile one file and print the requested stages.
    Compile {
        file: PathBuf,
        /// Stages to print, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "ir")]
        emit: Vec<Stage>,
        /// Bind a compile-time parameter (repeatable): -D BLOCK=1024, -D T=bf16.
        #[arg(short = 'D', value_name = "NAME=VALUE")]
        defines: Vec<String>,
        /// Only this kernel (default: every kernel in the file).
        #[arg(long)]
        kernel: Option<String>,
    },
    /// Run each file's `run` specs and compare with their references.
    Verify {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Run on the reference interpreter (the CPU).
        #[arg(long)]
        interpret: bool,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Stage {
    Ast,
    Ir,
}

/// Runs the command line `args` (program name first); returns the exit code.
pub fn run(args: &[String], out: &mut dyn Write, err: &mut dyn WriteColor) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let text = e.render().to_string();
            let _ = if code == 0 { write!(out, "{text}") } else { write!(err, "{text}") };
            return code;
        }
    };
    let r = match cli.command {
        Command::Check { files, defines } => cmd_check(&files, &defines, out, err),
        Command::Compile { file, emit, defines, kernel } => cmd_compile(&file, &emit, &defines, kernel.as_deref(), out, err),
        Command::Verify { files, interpret } => cmd_verify(&files, interpret, out, err),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            let _ = writeln!(err, "error: {e:#}");
            2
        }
    }
}

/// `NAME=VALUE` with VALUE an integer, float, bool or dtype name.
fn parse_defines(defines: &[String]) -> anyhow::Result<Bindings> {
    defines
        .iter()
        .map(|d| {
            let (name, value) = d.split_once('=').ok_or_else(|| anyhow::anyhow!("`-D {d}`: expected NAME=VALUE, e.g. -D BLOCK=1024"))?;
            let v = if let Ok(i) = value.parse::<i64>() {
                ConstValue::Int(i)
            } else if let Ok(f) = value.parse::<f64>() {
                ConstValue::Float(f)
            } else if value == "true" || value == "false" {
                ConstValue::Bool(value == "true")
            } else if let Some(t) = DType::from_name(value) {
                ConstValue::DType(t)
            } else {
                anyhow::bail!("`-D {d}`: `{value}` is not an integer, float, bool or dtype");
            };
            Ok((name.trim().to_string(), v))
        })
        .collect()
}

struct Source {
    name: String,
    text: String,
}

fn read(path: &Path) -> anyhow::Result<Source> {
    let bytes = std::fs::read(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let text = String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("{} is not UTF-8 text", path.display()))?;
    Ok(Source { name: path.display().to_string(), text })
}

/// Parses and checks a file: the AST, the IR of each kernel (with `bindings`), the run specs,
/// and every diagnostic found.
pub struct Checked {
    pub ast: Option<syntax::ast::File>,
    pub kernels: Vec<Kernel>,
    pub specs: Vec<RunSpec>,
    pub diags: Vec<Diagnostic>,
}

pub fn check_source(text: &str, bindings: &Bindings) -> Checked {
    let ast = match syntax::parse(text) {
        Ok(a) => a,
        Err(d) => return Checked { ast: None, kernels: vec![], specs: vec![], diags: d },
    };
    let (kernels, mut diags) = check::check_file(text, &ast, bindings);
    let (specs, spec_diags) = spec::parse_specs(&ast);
    diags.extend(spec_diags);
    let names = check::kernel_names(&ast);
    for s in &specs {
        if !names.contains(&s.kernel) {
            diags.push(Diagnostic::error(s.span, format!("run spec for unknown kernel `{}`", s.kernel)).label("no kernel of that name"));
        }
    }
    Checked { ast: Some(ast), kernels, specs, diags }
}

fn cmd_check(files: &[PathBuf], defines: &[String], out: &mut dyn Write, err: &mut dyn WriteColor) -> anyhow::Result<i32> {
    let bindings = parse_defines(defines)?;
    let mut failed = 0;
    for f in files {
        let src = read(f)?;
        let c = check_source(&src.text, &bindings);
        if c.diags.is_empty() {
            writeln!(out, "{}: ok ({} kernel{})", src.name, c.kernels.len(), if c.kernels.len() == 1 { "" } else { "s" })?;
        } else {
            diag::emit(err, &src.name, &src.text, &c.diags);
            failed += 1;
        }
    }
    Ok(if failed > 0 { 1 } else { 0 })
}

fn cmd_compile(file: &Path, emit: &[Stage], defines: &[String], kernel: Option<&str>, out: &mut dyn Write, err: &mut dyn WriteColor) -> anyhow::Result<i32> {
    let bindings = parse_defines(defines)?;
    let src = read(file)?;
    let ast = match syntax::parse(&src.text) {
        Ok(a) => a,
        Err(d) => {
            diag::emit(err, &src.name, &src.text, &d);
            return Ok(1);
        }
    };
    if emit.contains(&Stage::Ast) {
        write!(out, "{ast}")?;
    }
    let names = match kernel {
        Some(k) => vec![k.to_string()],
        None => check::kernel_names(&ast),
    };
    let mut failed = false;
    for name in names {
        match check::check_kernel(&src.text, &ast, &name, &bindings) {
            Ok(k) => {
                if emit.contains(&Stage::Ir) {
                    write!(out, "{k}")?;
                }
            }
            Err(d) => {
                diag::emit(err, &src.name, &src.text, &d);
                failed = true;
            }
        }
    }
    Ok(if failed { 1 } else { 0 })
}

/// The seed of one case's inputs: stable across runs and machines.
fn seed(kernel: &str, case: usize) -> u64 {
    kernel.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3)) ^ case as u64
}

/// One verified case, as printed.
pub struct CaseResult {
    pub kernel: String,
    pub case: String,
    pub comparisons: Vec<spec::Comparison>,
    pub error: Option<String>,
    pub millis: f64,
}

impl CaseResult {
    pub fn passed(&self) -> bool {
        self.error.is_none() && self.comparisons.iter().all(|c| c.passed())
    }
}

/// Runs every case of every run spec in `text` on the interpreter.
pub fn verify_interpreted(text: &str) -> Result<Vec<CaseResult>, Vec<Diagnostic>> {
    let c = check_source(text, &vec![]);
    if !c.diags.is_empty() {
        return Err(c.diags);
    }
    let ast = c.ast.expect("no diagnostics means the file parsed");
    let mut results = Vec::new();
    for s in &c.specs {
        let reference = match &s.reference {
            Some((name, span)) => match tile_examples::reference(name) {
                Some(r) => Some(r),
                None => {
                    return Err(vec![Diagnostic::error(*span, format!("no reference named `{name}`"))
                        .label("unknown reference")
                        .note(format!("known references: {}", tile_examples::REFERENCES.iter().map(|r| r.0).collect::<Vec<_>>().join(", ")))]);
                }
            },
            None => None,
        };
        for (i, case) in spec::cases(s).map_err(|d| vec![d])?.iter().enumerate() {
            let started = Instant::now();
            let mut r = CaseResult { kernel: s.kernel.clone(), case: case.label(), comparisons: vec![], error: None, millis: 0.0 };
            match run_case(text, &ast, s, case, seed(&s.kernel, i), reference) {
                Ok(c) => r.comparisons = c,
                Err(e) => r.error = Some(e),
            }
            r.millis = started.elapsed().as_secs_f64() * 1e3;
            results.push(r);
        }
    }
    Ok(results)
}

fn run_case(text: &str, ast: &syntax::ast::File, s: &RunSpec, case: &Case, seed: u64, reference: Option<spec::Reference>) -> Result<Vec<spec::Comparison>, String> {
    let render = |d: Vec<Diagnostic>| diag::render("spec", text, &d);
    let kernel = check::check_kernel(text, ast, &s.kernel, &case.consts).map_err(render)?;
    let mut p = spec::prepare(s, case, &kernel, seed).map_err(|d| render(vec![d]))?;
    let Some(reference) = reference else {
        return Err("the run spec names no `reference(..)`".into());
    };
    let expected = reference(&p.reference_input);
    interp::run(&kernel, p.grid, &p.args, &mut p.buffers).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for (name, idx) in &p.outputs {
        let buf = &p.buffers[*idx];
        let want = expected.get(name).ok_or_else(|| format!("the reference gives no values for output `{name}`"))?;
        let tol = s.tolerance.unwrap_or_else(|| spec::default_tolerance(buf.dtype));
        out.push(spec::compare(name, buf.dtype, &buf.to_f64(), want, tol));
    }
    Ok(out)
}

fn cmd_verify(files: &[PathBuf], interpret: bool, out: &mut dyn Write, err: &mut dyn WriteColor) -> anyhow::Result<i32> {
    if !interpret {
        anyhow::bail!("verification on the GPU is not available in this build; pass --interpret to verify on the reference interpreter");
    }
    let (mut passed, mut failed) = (0, 0);
    for f in files {
        let src = read(f)?;
        match verify_interpreted(&src.text) {
            Err(d) => {
                diag::emit(err, &src.name, &src.text, &d);
                failed += 1;
            }
            Ok(results) if results.is_empty() => {
                writeln!(err, "{}: no `run` spec; nothing to verify", src.name)?;
                failed += 1;
            }
            Ok(results) => {
                writeln!(out, "{}", src.name)?;
                for r in results {
                    let status = if r.passed() { "ok" } else { "FAILED" };
                    writeln!(out, "  {:<6} {} [{}]  ({:.0} ms)", status, r.kernel, r.case, r.millis)?;
                    if let Some(e) = &r.error {
                        for line in e.lines() {
                            writeln!(out, "         {line}")?;
                        }
                    }
                    for c in &r.comparisons {
                        write!(out, "         {:<8} {:>9} {:<6} max abs {:.2e}  max rel {:.2e}  (rtol {:.1e}, atol {:.1e})", c.name, c.len, c.dtype.name(), c.max_abs, c.max_rel, c.rtol, c.atol)?;
                        match c.first_bad {
                            Some((i, g, w)) => writeln!(out, "  {} mismatches; first at [{i}]: got {g}, expected {w}", c.mismatches)?,
                            None => writeln!(out)?,
                        }
                    }
                    if r.passed() { passed += 1 } else { failed += 1 }
                }
            }
        }
    }
    writeln!(out, "verify: {passed} passed, {failed} failed")?;
    Ok(if failed > 0 { 1 } else { 0 })
}
