//! The expansion of `kernels!`: tokens in, tokens out, the `.tile` file read from `base`.

use std::path::Path;

use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote};
use syn::parse::{Parse, ParseStream};
use syn::{Attribute, LitStr, Token, Visibility};
use tile_lang::diag::{self, Diagnostic, Severity};
use tile_lang::ir::DType;
use tile_lang::syntax::{self, ast};

/// `#[attrs] VIS mod NAME = "PATH";`
struct Input {
    attrs: Vec<Attribute>,
    vis: Visibility,
    name: Ident,
    path: LitStr,
}

impl Parse for Input {
    fn parse(input: ParseStream) -> syn::Result<Input> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis = input.parse()?;
        input.parse::<Token![mod]>()?;
        let name = input.parse()?;
        input.parse::<Token![=]>()?;
        let path = input.parse()?;
        input.parse::<Option<Token![;]>>()?;
        Ok(Input { attrs, vis, name, path })
    }
}

/// The module for `input`, or a `compile_error!` saying what is wrong (with the `.tile` lines
/// for errors in the file, which then is still tracked, so that fixing it rebuilds the crate).
pub fn expand(input: TokenStream, base: &Path) -> TokenStream {
    let input: Input = match syn::parse2(input) {
        Ok(i) => i,
        Err(e) => return e.to_compile_error(),
    };
    let rel = input.path.value();
    let file = base.join(&rel);
    let text = match syntax::read_source(&file) {
        Ok(t) => t,
        Err(e @ syntax::ReadError::Io { .. }) => {
            let message = format!("{e} (the path is relative to the directory of the crate's Cargo.toml)");
            return syn::Error::new(input.path.span(), message).to_compile_error();
        }
        Err(e) => return syn::Error::new(input.path.span(), e.to_string()).to_compile_error(),
    };
    let abs = file.to_string_lossy().into_owned();
    match module(&input, &rel, &abs, &text) {
        Ok(t) => t,
        Err(e) => {
            let e = e.to_compile_error();
            quote! {
                const _: &str = include_str!(#abs);
                #e
            }
        }
    }
}

/// An error at the macro's path for diagnostics of the `.tile` file, rendered with its lines.
fn tile_error(path: &LitStr, rel: &str, text: &str, diags: &[Diagnostic]) -> syn::Error {
    let rendered = diag::render(rel, text, diags);
    syn::Error::new(path.span(), format!("{rel} does not compile:\n{}", rendered.trim_end()))
}

fn module(input: &Input, rel: &str, abs: &str, text: &str) -> syn::Result<TokenStream> {
    let file = syntax::parse(text).map_err(|d| tile_error(&input.path, rel, text, &d))?;
    // What `tilec check` reports: file-level checks, every kernel with its default bindings, the
    // run specs.
    let (_, mut diags) = tile_lang::check::check_file(text, &file, &vec![]);
    diags.extend(tile_lang::spec::parse_specs(&file).1);
    diags.retain(|d| d.severity == Severity::Error);
    if !diags.is_empty() {
        return Err(tile_error(&input.path, rel, text, &diags));
    }
    let mut methods = Vec::new();
    let mut items = Vec::new();
    // Kernels without a launcher, and why: said in the module's documentation.
    let mut skipped = Vec::new();
    // Every generated name, with the kernel that made it: two kernels must not make one.
    let mut names: Vec<(String, String)> = ["Kernels", "new", "jit"]
        .iter()
        .map(|n| (n.to_string(), String::new()))
        .collect();
    for item in &file.items {
        if let ast::Item::Kernel(def) = item {
            let k = match Launcher::new(def, text) {
                Ok(k) => k,
                Err(Unsupported(span, why)) => {
                    let (line, col) = line_col(text, span.start as usize);
                    skipped.push(format!("`{}` ({rel}:{line}:{col}: {why})", def.name.name));
                    continue;
                }
            };
            if let Some(g) = k
                .generics
                .iter()
                .map(|g| g.to_string().trim_start_matches("r#").to_string())
                .find(|g| *g == k.ty.to_string() || *g == k.consts_ty.to_string())
            {
                return Err(syn::Error::new(
                    input.path.span(),
                    format!(
                        "{rel}: kernel `{}`'s dtype constant `{g}` has the name of its generated type; rename one of them",
                        def.name.name
                    ),
                ));
            }
            for made in [k.ty.to_string(), k.consts_ty.to_string(), def.name.name.clone()] {
                if let Some((_, other)) = names.iter().find(|(n, _)| *n == made) {
                    let by = if other.is_empty() {
                        "the generated `Kernels` type".to_string()
                    } else {
                        format!("kernel `{other}`")
                    };
                    return Err(syn::Error::new(
                        input.path.span(),
                        format!(
                            "{rel}: kernel `{}` would generate `{made}`, which {by} already does; rename one of them",
                            def.name.name
                        ),
                    ));
                }
                names.push((made, def.name.name.clone()));
            }
            methods.push(k.constructor());
            items.push(k.items(rel));
        }
    }
    let skipped_doc = if skipped.is_empty() {
        String::new()
    } else {
        format!(
            "\n\n No typed launcher (launch these through `Kernels::jit().kernel(..)` with `Arg`s): {}.",
            skipped.join("; ")
        )
    };
    let Input { attrs, vis, name, .. } = input;
    let module_doc =
        format!(" Typed launchers for the kernels of `{rel}` (generated by `tile_jit::kernels!`).{skipped_doc}");
    Ok(quote! {
        #(#attrs)*
        #[doc = #module_doc]
        #vis mod #name {
            /// The `.tile` source, compiled into the program (the crate rebuilds when it changes).
            pub const SOURCE: &str = include_str!(#abs);
            /// The path given to `kernels!`, which JIT errors name.
            pub const PATH: &str = #rel;

            /// The file's JIT on one GPU: one cache, shared by every launcher made from it.
            #[derive(Clone)]
            pub struct Kernels {
                jit: ::tile_jit::Jit,
            }

            impl Kernels {
                /// A JIT for the file on `gpu`; nothing compiles until a kernel is launched.
                pub fn new(gpu: &::tile_jit::Gpu, opts: ::tile_jit::JitOptions) -> ::core::result::Result<Kernels, ::tile_jit::JitError> {
                    let source = ::tile_jit::Source::Text { name: PATH.to_string(), text: SOURCE.to_string() };
                    Ok(Kernels { jit: ::tile_jit::Jit::new(gpu, source, opts)? })
                }

                /// The JIT, for anything the typed launchers do not cover.
                pub fn jit(&self) -> &::tile_jit::Jit {
                    &self.jit
                }

                #(#methods)*
            }

            #(#items)*
        }
    })
}

/// The 1-based line and column of byte `at` of `text`.
fn line_col(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// A raw identifier for a `.tile` name (every `.tile` name is a valid Rust identifier; raw ones
/// also allow Rust keywords such as `type` or `ref`).
fn ident(name: &str) -> Ident {
    match name {
        "self" | "super" | "crate" | "Self" | "_" => format_ident!("{name}_"),
        _ => Ident::new_raw(name, Span::call_site()),
    }
}

/// A local of the generated code, hygienic: it cannot clash with a `.tile` name, whatever that is.
fn local(name: &str) -> Ident {
    Ident::new(name, Span::mixed_site())
}

/// `vector_add` → `VectorAdd`; a name that would start with a digit or be empty (`_2d`, `_`)
/// gets `Kernel` in front.
fn pascal(name: &str) -> String {
    let p: String = name
        .split('_')
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut c = w.chars();
            c.next().map_or(String::new(), |f| f.to_uppercase().chain(c).collect())
        })
        .collect();
    if p.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) && p != "Self" {
        p
    } else {
        format!("Kernel{p}")
    }
}

/// The host type of a dtype's elements, where tile-jit has one.
fn host(d: DType) -> Option<TokenStream> {
    Some(match d {
        DType::I8 => quote!(i8),
        DType::I16 => quote!(i16),
        DType::I32 => quote!(i32),
        DType::I64 => quote!(i64),
        DType::U8 => quote!(u8),
        DType::U16 => quote!(u16),
        DType::U32 => quote!(u32),
        DType::U64 => quote!(u64),
        DType::F16 => quote!(::tile_jit::half::f16),
        DType::BF16 => quote!(::tile_jit::half::bf16),
        DType::F32 => quote!(f32),
        DType::F64 => quote!(f64),
        DType::F8E4M3 => quote!(::tile_jit::float8::F8E4M3),
        DType::F8E5M2 => quote!(::tile_jit::float8::F8E5M2),
        DType::Bool => return None,
    })
}

/// Why a kernel gets no launcher: where, and what.
struct Unsupported(tile_lang::diag::Span, String);

/// One kernel's launcher, as data.
struct Launcher {
    name: String,
    ty: Ident,
    consts_ty: Ident,
    /// The signature as written, for the docs.
    signature: String,
    /// `dtype` constants that parameter types name: type parameters of the launcher.
    generics: Vec<Ident>,
    /// Fields of the constants struct: `(name, Rust type, binding expression from `v`)`.
    fields: Vec<(String, TokenStream, TokenStream)>,
    /// Parameters: `(name, Rust parameter type, argument expression)`.
    params: Vec<(Ident, TokenStream, TokenStream)>,
    /// The `#[grid(..)]` as written, when there is one.
    grid: Option<String>,
}

impl Launcher {
    fn new(def: &ast::FnDef, text: &str) -> Result<Launcher, Unsupported> {
        let name = def.name.name.clone();
        let is_dtype_const = |n: &str| {
            def.consts
                .iter()
                .any(|c| c.name.name == n && matches!(&c.ty, ast::TypeExpr::Named(t) if t.name == "dtype"))
        };
        // The element type a type expression names: a host type or a dtype constant.
        let elem = |t: &ast::Ident, generics: &mut Vec<String>| -> Result<TokenStream, Unsupported> {
            if is_dtype_const(&t.name) {
                if !generics.contains(&t.name) {
                    generics.push(t.name.clone());
                }
                let g = ident(&t.name);
                return Ok(quote!(#g));
            }
            DType::from_name(&t.name)
                .and_then(host)
                .ok_or_else(|| Unsupported(t.span, format!("`{}` has no Rust element type in tile-jit yet", t.name)))
        };
        let mut generics = Vec::new();
        let mut params = Vec::new();
        for p in &def.params {
            let id = ident(&p.name.name);
            let ty = p.ty.as_ref().expect("checked kernels type every parameter");
            let (rust, arg) = match ty {
                ast::TypeExpr::Ptr { mutable, pointee, .. } => {
                    let ast::TypeExpr::Named(t) = pointee.as_ref() else {
                        return Err(Unsupported(ty.span(), "a pointer to a pointer".into()));
                    };
                    let e = elem(t, &mut generics)?;
                    if *mutable {
                        (
                            quote!(&mut impl ::tile_jit::DeviceMemory<Elem = #e>),
                            quote!(::tile_jit::Arg::buf_mut(#id)),
                        )
                    } else {
                        (
                            quote!(&impl ::tile_jit::DeviceMemory<Elem = #e>),
                            quote!(::tile_jit::Arg::buf(#id)),
                        )
                    }
                }
                ast::TypeExpr::Named(t) if t.name == "bool" => (quote!(bool), quote!(::tile_jit::Arg::bool(#id))),
                ast::TypeExpr::Named(t) => {
                    let e = elem(t, &mut generics)?;
                    (e, quote!(::tile_jit::Arg::scalar(#id)))
                }
            };
            params.push((id, rust, arg));
        }
        let mut fields = Vec::new();
        for c in &def.consts {
            let n = c.name.name.clone();
            if generics.contains(&n) {
                continue;
            }
            let ast::TypeExpr::Named(t) = &c.ty else {
                return Err(Unsupported(c.ty.span(), "a constant of pointer type".into()));
            };
            let (rust, bind) = match t.name.as_str() {
                "dtype" => (quote!(::tile_jit::DType), {
                    let v = local("v");
                    quote!(::tile_jit::ConstValue::DType(#v))
                }),
                "bool" => (quote!(bool), {
                    let v = local("v");
                    quote!(::tile_jit::ConstValue::Bool(#v))
                }),
                other => match DType::from_name(other) {
                    Some(d) if d.is_int() => {
                        let h = host(d).expect("integers have host types");
                        (h, {
                            let v = local("v");
                            quote!(::tile_jit::ConstValue::Int(#v as i64))
                        })
                    }
                    Some(d) if d.is_float() => (quote!(f64), {
                        let v = local("v");
                        quote!(::tile_jit::ConstValue::Float(#v))
                    }),
                    _ => return Err(Unsupported(t.span, format!("a constant of type `{other}`"))),
                },
            };
            fields.push((n, rust, bind));
        }
        let grid = def
            .attrs
            .iter()
            .find(|a| a.name.name == "grid")
            .map(|a| text[a.span.range()].to_string());
        let sig_end = def.body.span.start as usize;
        let signature = text[def.name.span.start as usize..sig_end]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .replace("( ", "(")
            .replace(", )", ")")
            .replace("< ", "<")
            .replace(", >", ">");
        Ok(Launcher {
            ty: format_ident!("{}", pascal(&name)),
            consts_ty: format_ident!("{}Consts", pascal(&name)),
            name,
            signature,
            generics: generics.iter().map(|g| ident(g)).collect(),
            fields,
            params,
            grid,
        })
    }

    /// `Kernels::NAME::<T..>(&self, consts) -> Result<Launcher<T..>, JitError>`.
    fn constructor(&self) -> TokenStream {
        let (consts, bindings, v) = (local("consts"), local("bindings"), local("v"));
        let Launcher {
            name,
            ty,
            consts_ty,
            generics,
            fields,
            ..
        } = self;
        let method = ident(name);
        let binds = fields.iter().map(|(n, _, bind)| {
            let f = ident(n);
            quote! {
                if let Some(#v) = #consts.#f {
                    #bindings.push((#n, #bind));
                }
            }
        });
        let dtype_binds = generics.iter().map(|g| {
            let n = g.to_string().trim_start_matches("r#").to_string();
            quote! { #bindings.push((#n, ::tile_jit::ConstValue::DType(<#g as ::tile_jit::Element>::DTYPE))); }
        });
        let doc = format!(
            " The launcher of `{name}`, its constants bound from `consts` (`None`: the tuner's winner on this GPU, else the static model's choice){}. Checks the kernel; compiles nothing yet.",
            if generics.is_empty() {
                String::new()
            } else {
                format!(
                    " and its dtype constants from the type parameters ({})",
                    generics
                        .iter()
                        .map(|g| g.to_string().trim_start_matches("r#").to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        );
        quote! {
            #[doc = #doc]
            pub fn #method<#(#generics: ::tile_jit::Element),*>(&self, #consts: #consts_ty) -> ::core::result::Result<#ty<#(#generics),*>, ::tile_jit::JitError> {
                let _ = &#consts;
                let mut #bindings: ::std::vec::Vec<(&str, ::tile_jit::ConstValue)> = ::std::vec::Vec::new();
                #(#binds)*
                #(#dtype_binds)*
                Ok(#ty { kernel: self.jit.kernel(#name, &#bindings)?, _dtypes: ::core::marker::PhantomData })
            }
        }
    }

    /// The constants struct and the launcher type with its methods.
    fn items(&self, rel: &str) -> TokenStream {
        let Launcher {
            name,
            ty,
            consts_ty,
            signature,
            generics,
            fields,
            params,
            grid: grid_attr,
        } = self;
        let field_defs = fields.iter().map(|(n, rust, _)| {
            let f = ident(n);
            let doc = format!(" `{n}`; `None`: the tuner's winner, else the static model's choice.");
            quote! {
                #[doc = #doc]
                pub #f: ::core::option::Option<#rust>,
            }
        });
        let names: Vec<&Ident> = params.iter().map(|p| &p.0).collect();
        let types: Vec<&TokenStream> = params.iter().map(|p| &p.1).collect();
        let args: Vec<&TokenStream> = params.iter().map(|p| &p.2).collect();
        let n = params.len();
        let (grid, stream, args_) = (local("grid"), local("stream"), local("args"));
        let (cap, graph, node) = (local("cap"), local("graph"), local("node"));
        // With `#[grid(..)]` the launch is planned for its own sizes and the grid follows the
        // plan (one lookup for both); without it the caller's grid runs the handle's plan.
        let (grid_param, launch_call, launch_on_call, capture_call, update_call, grid_doc) = match grid_attr {
            Some(g) => (
                quote!(),
                quote!(self.kernel.launch_planned(&#args_)),
                quote!(self.kernel.launch_planned_on(#stream, &#args_)),
                quote!(#cap.launch_planned(&self.kernel, &#args_)),
                quote!(#graph.update_as(#node, &self.kernel, ::core::option::Option::None, &#args_)),
                format!("on the grid its `{g}` gives for these arguments, planned for their sizes"),
            ),
            None => (
                quote!(#grid: impl ::core::convert::Into<::tile_jit::Grid>,),
                quote!(self.kernel.launch(#grid, &#args_)),
                quote!(self.kernel.launch_on(#stream, #grid, &#args_)),
                quote!(#cap.launch(&self.kernel, #grid, &#args_)),
                quote!(#graph.update_as(#node, &self.kernel, ::core::option::Option::Some(#grid.into()), &#args_)),
                "on `grid` programs (the kernel has no `#[grid(..)]`)".to_string(),
            ),
        };
        let consts_doc = format!(" The compile-time constants of `{name}` (all `None` by default).");
        let ty_doc = format!(
            " `{signature}` from `{rel}`: a typed launcher (cheap to clone; launches from several threads are fine)."
        );
        let launch_doc = format!(" Launches `{name}` {grid_doc} and waits for it to finish.");
        let launch_on_doc =
            format!(" Enqueues `{name}` on `stream` {grid_doc} without waiting (see `JitKernel::launch_on`).");
        let capture_doc = format!(
            " Captures a launch of `{name}` {grid_doc} as the next node of a CUDA graph being captured (checked now; replays check nothing)."
        );
        let update_doc = format!(
            " Points graph node `node` (captured from `{name}`) at these arguments {grid_doc}, checked like a launch; the next replays run them."
        );
        quote! {
            #[doc = #consts_doc]
            #[derive(Clone, Copy, Debug, Default, PartialEq)]
            #[allow(non_snake_case)]
            pub struct #consts_ty {
                #(#field_defs)*
            }

            #[doc = #ty_doc]
            pub struct #ty<#(#generics: ::tile_jit::Element),*> {
                kernel: ::tile_jit::JitKernel,
                _dtypes: ::core::marker::PhantomData<fn() -> (#(#generics,)*)>,
            }

            impl<#(#generics: ::tile_jit::Element),*> ::core::clone::Clone for #ty<#(#generics),*> {
                fn clone(&self) -> Self {
                    #ty { kernel: self.kernel.clone(), _dtypes: ::core::marker::PhantomData }
                }
            }

            #[allow(non_snake_case, clippy::too_many_arguments)]
            impl<#(#generics: ::tile_jit::Element),*> #ty<#(#generics),*> {
                #[doc = #launch_doc]
                pub fn launch(&self, #grid_param #(#names: #types),*) -> ::core::result::Result<(), ::tile_jit::JitError> {
                    let #args_: [::tile_jit::Arg<'_>; #n] = [#(#args),*];
                    #launch_call
                }

                #[doc = #launch_on_doc]
                pub fn launch_on(&self, #stream: &::tile_jit::Stream, #grid_param #(#names: #types),*) -> ::core::result::Result<(), ::tile_jit::JitError> {
                    let #args_: [::tile_jit::Arg<'_>; #n] = [#(#args),*];
                    #launch_on_call
                }

                #[doc = #capture_doc]
                pub fn capture(&self, #cap: &mut ::tile_jit::GraphCapture, #grid_param #(#names: #types),*) -> ::core::result::Result<::tile_jit::NodeId, ::tile_jit::JitError> {
                    let #args_: [::tile_jit::Arg<'_>; #n] = [#(#args),*];
                    #capture_call
                }

                #[doc = #update_doc]
                pub fn update_node(&self, #graph: &mut ::tile_jit::JitGraph, #node: ::tile_jit::NodeId, #grid_param #(#names: #types),*) -> ::core::result::Result<(), ::tile_jit::JitError> {
                    let #args_: [::tile_jit::Arg<'_>; #n] = [#(#args),*];
                    #update_call
                }

                /// The untyped handle: its constants (`consts()`), specialisations, graphs.
                pub fn kernel(&self) -> &::tile_jit::JitKernel {
                    &self.kernel
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("tile-macros-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_tile_error_is_a_compile_error_with_the_tile_line() {
        let d = dir();
        std::fs::write(
            d.join("bad.tile"),
            "kernel k(x: *f32) {\n    let y = load(x + arange(0, 4)) + z;\n}\n",
        )
        .unwrap();
        let out = expand(quote!(mod k = "bad.tile";), &d).to_string();
        assert!(out.contains("compile_error"), "{out}");
        assert!(out.contains("bad.tile does not compile"), "{out}");
        assert!(out.contains("bad.tile:2:38"), "the .tile line and column: {out}");
        assert!(out.contains("include_str"), "the file is still tracked: {out}");
        let out = expand(quote!(mod k = "missing.tile";), &d).to_string();
        assert!(
            out.contains("cannot read") && out.contains("relative to the directory of the crate"),
            "{out}"
        );
    }

    #[test]
    fn a_kernel_without_rust_types_is_skipped_and_said_and_names_must_not_clash() {
        let d = dir();
        let ok = "kernel copy(x: *f32, out: *mut f32, stream: i32, grid: i32) {\n    store(out + arange(0, 4), load(x + arange(0, 4)));\n}\n";
        let flags = "kernel flags(x: *bool, out: *mut f32) {\n    store(out + arange(0, 4), load(x + arange(0, 4)).to(f32));\n}\n";
        std::fs::write(d.join("mixed.tile"), format!("{ok}{flags}")).unwrap();
        let out = expand(quote!(mod m = "mixed.tile";), &d).to_string();
        assert!(!out.contains("compile_error"), "{out}");
        assert!(out.contains("pub struct Copy"), "{out}");
        assert!(!out.contains("pub struct Flags"), "{out}");
        assert!(
            out.contains("No typed launcher")
                && out.contains("`flags` (mixed.tile:4:18: `bool` has no Rust element type in tile-jit yet)"),
            "{out}"
        );
        // Parameters named like the launcher's own arguments keep their names.
        assert!(
            out.contains("r#stream : i32") && out.contains("stream : & :: tile_jit :: Stream"),
            "{out}"
        );
        std::fs::write(d.join("clash.tile"), ok.replace("kernel copy", "kernel new")).unwrap();
        let out = expand(quote!(mod m = "clash.tile";), &d).to_string();
        assert!(
            out.contains("kernel `new` would generate `new`, which the generated `Kernels` type already does"),
            "{out}"
        );
        std::fs::write(
            d.join("clash2.tile"),
            format!("{ok}{}", ok.replace("kernel copy", "kernel Copy")),
        )
        .unwrap();
        let out = expand(quote!(mod m = "clash2.tile";), &d).to_string();
        assert!(
            out.contains("kernel `Copy` would generate `Copy`, which kernel `copy` already does"),
            "{out}"
        );
        assert_eq!(
            (pascal("_2d"), pascal("_"), pascal("self")),
            ("Kernel2d".into(), "Kernel".into(), "KernelSelf".into())
        );
    }

    #[test]
    fn every_kernel_gets_a_typed_launcher() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dsl-examples");
        let out = expand(quote!(pub mod m = "matmul.tile";), &root).to_string();
        // T is a dtype constant the parameters name: a type parameter of the launcher.
        assert!(
            out.contains("pub struct Matmul < r#T : :: tile_jit :: Element >"),
            "{out}"
        );
        assert!(
            out.contains("r#a : & impl :: tile_jit :: DeviceMemory < Elem = r#T >"),
            "{out}"
        );
        assert!(
            out.contains("r#c : & mut impl :: tile_jit :: DeviceMemory < Elem = r#T >"),
            "{out}"
        );
        assert!(out.contains("pub r#BM : :: core :: option :: Option < i32 >"), "{out}");
        // `#[grid(..)]` gives the grid; without it the launch takes one.
        assert!(out.contains("self . kernel . launch_planned (& args)"), "{out}");
        // `layernorm_chunked` has no `#[grid(..)]`.
        let out = expand(quote!(pub mod m = "layernorm.tile";), &root).to_string();
        assert!(
            out.contains("grid : impl :: core :: convert :: Into < :: tile_jit :: Grid >"),
            "{out}"
        );
        assert_eq!(pascal("paged_decode_ref"), "PagedDecodeRef");
    }
}
