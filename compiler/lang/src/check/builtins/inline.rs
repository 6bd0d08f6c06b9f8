//! Calls of helper functions, which are inlined: the body is checked with the parameters bound.

use super::*;

impl<'a> Cx<'a> {
    /// Inlines a helper function: its body is checked with the parameters bound to the arguments.
    pub fn inline_call(
        &mut self,
        f: &'a ast::FnDef,
        args: Vec<(Option<&ast::Ident>, Val, Span)>,
        span: Span,
    ) -> R<Val> {
        if self.inline_depth >= MAX_INLINE_DEPTH {
            return self.fail(
                Diagnostic::error(span, format!("helper calls nested more than {MAX_INLINE_DEPTH} deep"))
                    .label(format!("calling `{}`", f.name.name))
                    .with(f.name.span, "defined here")
                    .note("helpers are inlined, so they cannot be recursive; use a loop instead"),
            );
        }
        let mut slots: Vec<Option<(Val, Span)>> = vec![None; f.params.len()];
        let mut next = 0;
        for (n, v, s) in args {
            let i = match n {
                None => {
                    next += 1;
                    next - 1
                }
                Some(id) => match f.params.iter().position(|p| p.name.name == id.name) {
                    Some(i) => i,
                    None => {
                        return self.fail(
                            Diagnostic::error(id.span, format!("`{}` has no parameter `{}`", f.name.name, id.name))
                                .label("unknown argument name")
                                .with(f.name.span, "defined here"),
                        );
                    }
                },
            };
            if i >= f.params.len() {
                return self.fail(
                    Diagnostic::error(s, format!("`{}` takes {} arguments", f.name.name, f.params.len()))
                        .label("extra argument")
                        .with(f.name.span, "defined here"),
                );
            }
            slots[i] = Some((v, s));
        }
        if let Some(i) = slots.iter().position(|s| s.is_none()) {
            return self.fail(
                Diagnostic::error(
                    span,
                    format!(
                        "`{}` needs {} arguments, {} given",
                        f.name.name,
                        f.params.len(),
                        slots.iter().filter(|s| s.is_some()).count()
                    ),
                )
                .label(format!("missing `{}`", f.params[i].name.name))
                .with(f.name.span, "defined here"),
            );
        }
        let mut bound = Vec::new();
        for (p, slot) in f.params.iter().zip(slots) {
            let (v, s) = slot.unwrap();
            let v = match &p.ty {
                Some(t) => {
                    let elem = self.resolve_type(t)?;
                    match v {
                        Val::Lit(_) if !elem.is_ptr() => Val::V(self.value(v, s, elem.dtype())?),
                        Val::V(id) if self.ty(id).elem == elem => v,
                        other => {
                            let l = self.describe(&other);
                            return self.fail(
                                Diagnostic::error(
                                    s,
                                    format!("argument `{}` of `{}` must be {elem}", p.name.name, f.name.name),
                                )
                                .label(l)
                                .with(t.span(), "declared here"),
                            );
                        }
                    }
                }
                None => v,
            };
            bound.push((p.name.name.clone(), v));
        }
        self.inline_depth += 1;
        self.push_scope(true);
        for (n, v) in bound {
            self.bind(&n, v, false);
        }
        let r = self.block(&f.body);
        self.pop_scope();
        self.inline_depth -= 1;
        let r = r?;
        if let (Some(t), Val::V(id)) = (&f.ret, &r) {
            let elem = self.resolve_type(t)?;
            if self.ty(*id).elem != elem {
                let found = self.ty(*id).clone();
                return self.fail(
                    Diagnostic::error(
                        f.body.tail.as_ref().map_or(f.span, |t| t.span),
                        format!("`{}` returns {found}, not {elem}", f.name.name),
                    )
                    .label("returned here")
                    .with(t.span(), "declared return type")
                    .help(format!(
                        "change the declared type to `{}`, or convert the value with `.to({elem})`",
                        found.elem
                    )),
                );
            }
        }
        Ok(r)
    }
}
