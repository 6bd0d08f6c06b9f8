//! The IR verifier: SSA scoping and the type rules of every op. Later stages may assume a
//! verified kernel and never re-check what is checked here.

use std::collections::HashSet;

use super::*;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("ir verifier: {op}{at}: {message}")]
pub struct VerifyError {
    pub op: String,
    pub at: String,
    pub message: String,
}

pub fn verify(k: &Kernel) -> Result<(), VerifyError> {
    let mut v = V {
        k,
        scopes: vec![HashSet::new()],
        defined: HashSet::new(),
    };
    for p in &k.params {
        if k.ty(p.value).elem != p.elem || !k.ty(p.value).is_scalar() {
            return Err(err(
                "kernel",
                Loc::default(),
                format!("parameter `{}` has a mismatched type", p.name),
            ));
        }
        v.def(p.value, "kernel", Loc::default())?;
    }
    v.region(&k.body, &[])
}

fn err(op: &str, loc: Loc, message: String) -> VerifyError {
    let at = if loc == Loc::default() {
        String::new()
    } else {
        format!(" at {}:{}", loc.line, loc.col)
    };
    VerifyError {
        op: op.to_string(),
        at,
        message,
    }
}

struct V<'a> {
    k: &'a Kernel,
    scopes: Vec<HashSet<ValueId>>,
    defined: HashSet<ValueId>,
}

impl V<'_> {
    fn def(&mut self, v: ValueId, op: &str, loc: Loc) -> Result<(), VerifyError> {
        if v.0 as usize >= self.k.values.len() {
            return Err(err(op, loc, format!("%{} has no type", v.0)));
        }
        if !self.defined.insert(v) {
            return Err(err(op, loc, format!("%{} is defined twice", v.0)));
        }
        let t = self.k.ty(v);
        if let Some(d) = t.shape.iter().find(|d| !d.is_power_of_two()) {
            return Err(err(op, loc, format!("%{} has dimension {d}, not a power of two", v.0)));
        }
        self.scopes.last_mut().unwrap().insert(v);
        Ok(())
    }

    fn visible(&self, v: ValueId) -> bool {
        self.scopes.iter().any(|s| s.contains(&v))
    }

    /// Checks a region whose args must have the types `args` (when given).
    fn region(&mut self, r: &Region, args: &[Type]) -> Result<(), VerifyError> {
        self.scopes.push(HashSet::new());
        for (i, a) in r.args.iter().enumerate() {
            self.def(*a, "region", Loc::default())?;
            if let Some(t) = args.get(i)
                && self.k.ty(*a) != t
            {
                return Err(err(
                    "region",
                    Loc::default(),
                    format!("argument %{} should be {t}", a.0),
                ));
            }
        }
        for op in &r.ops {
            self.op(op)?;
        }
        self.scopes.pop();
        Ok(())
    }

    fn op(&mut self, op: &Op) -> Result<(), VerifyError> {
        let name = op.kind.name();
        let fail = |m: String| err(name, op.loc, m);
        for o in &op.operands {
            if !self.visible(*o) {
                return Err(fail(format!("operand %{} is not defined before this op", o.0)));
            }
        }
        let ot: Vec<&Type> = op.operands.iter().map(|v| self.k.ty(*v)).collect();
        let rt: Vec<Type> = op.results.iter().map(|v| self.k.ty(*v).clone()).collect();
        self.check(op, &ot, &rt).map_err(fail)?;
        // Regions see the values defined before the op; results become visible after it.
        for (i, r) in op.regions.iter().enumerate() {
            let args = self.region_args(op, &ot, i);
            self.region(r, &args)?;
            let yields = match r.ops.last() {
                Some(Op {
                    kind: OpKind::Yield,
                    operands,
                    ..
                }) => operands.iter().map(|v| self.k.ty(*v).clone()).collect::<Vec<_>>(),
                _ => return Err(fail(format!("region {i} does not end in `yield`"))),
            };
            let want = self.region_yields(op, &ot, &rt);
            if yields != want {
                return Err(fail(format!(
                    "region {i} yields {} values of the wrong types",
                    yields.len()
                )));
            }
        }
        for r in &op.results {
            self.def(*r, name, op.loc)?;
        }
        Ok(())
    }

    fn region_args(&self, op: &Op, ot: &[&Type], _i: usize) -> Vec<Type> {
        match &op.kind {
            OpKind::For { .. } => {
                let mut v = vec![ot[0].clone()];
                v.extend(ot[3..].iter().map(|t| (*t).clone()));
                v
            }
            OpKind::ReduceWith { .. } | OpKind::ScanWith { .. } | OpKind::ClusterReduceWith => {
                // The accumulated values, then the next ones: two scalars per operand.
                let s: Vec<Type> = ot
                    .iter()
                    .map(|t| Type {
                        elem: t.elem,
                        shape: vec![],
                    })
                    .collect();
                s.iter().chain(&s).cloned().collect()
            }
            _ => vec![],
        }
    }

    fn region_yields(&self, op: &Op, ot: &[&Type], rt: &[Type]) -> Vec<Type> {
        match &op.kind {
            OpKind::ReduceWith { .. } | OpKind::ScanWith { .. } | OpKind::ClusterReduceWith => ot
                .iter()
                .map(|t| Type {
                    elem: t.elem,
                    shape: vec![],
                })
                .collect(),
            _ => rt.to_vec(),
        }
    }

    fn check(&self, op: &Op, ot: &[&Type], rt: &[Type]) -> Result<(), String> {
        use OpKind::*;
        let n_in = |n: usize| {
            if ot.len() == n {
                Ok(())
            } else {
                Err(format!("takes {n} operands, has {}", ot.len()))
            }
        };
        let n_out = |n: usize| {
            if rt.len() == n {
                Ok(())
            } else {
                Err(format!("has {n} results, not {}", rt.len()))
            }
        };
        let same = |a: &Type, b: &Type| {
            if a == b {
                Ok(())
            } else {
                Err(format!("types {a} and {b} differ"))
            }
        };
        let regions = |n: usize| {
            if op.regions.len() == n {
                Ok(())
            } else {
                Err(format!("needs {n} regions"))
            }
        };
        // As many results as operands, at least one (the reductions of several values at once).
        let one_result_each = || {
            if ot.is_empty() || rt.len() != ot.len() {
                Err(format!(
                    "expected as many results as operands (at least one), got {} and {}",
                    rt.len(),
                    ot.len()
                ))
            } else {
                Ok(())
            }
        };
        // What the programs of a cluster exchange: 32- or 64-bit number scalars, in a kernel
        // that runs in clusters.
        let cluster_values = || {
            if self.k.cluster <= 1 {
                return Err("a cluster reduction needs a kernel with `cluster(N)`, N > 1".to_string());
            }
            for (o, r) in ot.iter().zip(rt) {
                let number = o
                    .dtype()
                    .is_some_and(|d| (d.is_float() || d.is_int()) && d.bytes() >= 4);
                if !o.is_scalar() || !number {
                    return Err("cluster reductions combine 32- or 64-bit number scalars".into());
                }
                same(o, r)?;
            }
            Ok(())
        };
        if !matches!(
            op.kind,
            For { .. } | If | ReduceWith { .. } | ScanWith { .. } | ClusterReduceWith
        ) {
            regions(0)?;
        }
        match &op.kind {
            Const(c) => {
                n_in(0)?;
                n_out(1)?;
                let d = rt[0].dtype().ok_or("constant of pointer type")?;
                let ok = match c {
                    ConstValue::Int(_) => d.is_int(),
                    ConstValue::Float(_) => d.is_float(),
                    ConstValue::Bool(_) => d.is_bool(),
                    ConstValue::DType(_) => false,
                };
                if !ok || !rt[0].is_scalar() {
                    return Err(format!("constant {c} cannot have type {}", rt[0]));
                }
            }
            ProgramId(a) | NumPrograms(a) => {
                n_in(0)?;
                n_out(1)?;
                if *a > 2 {
                    return Err("axis must be 0, 1 or 2".into());
                }
                same(&rt[0], &Type::scalar(DType::I32))?;
            }
            Arange { start, end } => {
                n_in(0)?;
                n_out(1)?;
                let n = usize::try_from(end - start).map_err(|_| "empty range".to_string())?;
                same(&rt[0], &Type::tile(DType::I32, vec![n]))?;
            }
            Broadcast => {
                n_in(1)?;
                n_out(1)?;
                if ot[0].elem != rt[0].elem
                    || broadcast_shapes(&ot[0].shape, &rt[0].shape).as_deref() != Some(&rt[0].shape[..])
                {
                    return Err(format!("cannot broadcast {} to {}", ot[0], rt[0]));
                }
            }
            ExpandDims(a) => {
                n_in(1)?;
                n_out(1)?;
                let mut s = ot[0].shape.clone();
                if *a > s.len() {
                    return Err("axis out of range".into());
                }
                s.insert(*a, 1);
                same(&rt[0], &ot[0].with_shape(s))?;
            }
            Reshape => {
                n_in(1)?;
                n_out(1)?;
                if ot[0].elem != rt[0].elem || ot[0].numel() != rt[0].numel() {
                    return Err(format!("cannot reshape {} to {}", ot[0], rt[0]));
                }
            }
            Permute(p) => {
                n_in(1)?;
                n_out(1)?;
                let mut sorted = p.clone();
                sorted.sort();
                if sorted != (0..ot[0].shape.len()).collect::<Vec<_>>() {
                    return Err("not a permutation of the axes".into());
                }
                same(&rt[0], &ot[0].with_shape(p.iter().map(|&i| ot[0].shape[i]).collect()))?;
            }
            Join => {
                n_in(2)?;
                n_out(1)?;
                same(ot[0], ot[1])?;
                let mut s = ot[0].shape.clone();
                s.push(2);
                same(&rt[0], &ot[0].with_shape(s))?;
            }
            Split => {
                n_in(1)?;
                n_out(2)?;
                let mut s = ot[0].shape.clone();
                if s.pop() != Some(2) {
                    return Err("the last axis must have size 2".into());
                }
                same(&rt[0], &ot[0].with_shape(s.clone()))?;
                same(&rt[1], &ot[0].with_shape(s))?;
            }
            Unary(_) | MultipleOf(_) | MaxContiguous(_) => {
                n_in(1)?;
                n_out(1)?;
                same(ot[0], &rt[0])?;
            }
            Binary(_) => {
                n_in(2)?;
                n_out(1)?;
                same(ot[0], ot[1])?;
                same(ot[0], &rt[0])?;
            }
            Cmp(_) => {
                n_in(2)?;
                n_out(1)?;
                same(ot[0], ot[1])?;
                same(&rt[0], &ot[0].with_dtype(DType::Bool))?;
            }
            Fma => {
                n_in(3)?;
                n_out(1)?;
                same(ot[0], ot[1])?;
                same(ot[0], ot[2])?;
                same(ot[0], &rt[0])?;
            }
            Select => {
                n_in(3)?;
                n_out(1)?;
                same(ot[0], &ot[1].with_dtype(DType::Bool))?;
                same(ot[1], ot[2])?;
                same(ot[1], &rt[0])?;
            }
            Cast(_) | Bitcast => {
                n_in(1)?;
                n_out(1)?;
                if ot[0].shape != rt[0].shape || ot[0].elem.is_ptr() || rt[0].elem.is_ptr() {
                    return Err(format!("cannot convert {} to {}", ot[0], rt[0]));
                }
                if matches!(op.kind, Bitcast) && ot[0].dtype().map(|d| d.bits()) != rt[0].dtype().map(|d| d.bits()) {
                    return Err("bitcast between types of different widths".into());
                }
            }
            PtrAdd => {
                n_in(2)?;
                n_out(1)?;
                if !ot[0].elem.is_ptr() || !ot[1].dtype().is_some_and(|d| d.is_int()) || ot[0].shape != ot[1].shape {
                    return Err("takes a pointer and an integer offset of one shape".into());
                }
                same(ot[0], &rt[0])?;
            }
            Load { mask, other, .. } => {
                n_in(1 + *mask as usize + *other as usize)?;
                n_out(1)?;
                let Elem::Ptr { pointee, .. } = ot[0].elem else {
                    return Err("loads through a pointer".into());
                };
                same(&rt[0], &ot[0].with_dtype(pointee))?;
                if *mask {
                    same(ot[1], &ot[0].with_dtype(DType::Bool))?;
                }
                if *other {
                    same(ot[1 + *mask as usize], &rt[0])?;
                }
            }
            Store { mask, .. } | Atomic { mask, .. } => {
                n_in(2 + *mask as usize)?;
                n_out(if matches!(op.kind, Store { .. }) { 0 } else { 1 })?;
                let Elem::Ptr { pointee, mutable } = ot[0].elem else {
                    return Err("stores through a pointer".into());
                };
                if !mutable {
                    return Err("stores through a read-only pointer".into());
                }
                same(ot[1], &ot[0].with_dtype(pointee))?;
                if *mask {
                    same(ot[2], &ot[0].with_dtype(DType::Bool))?;
                }
                if !rt.is_empty() {
                    same(&rt[0], ot[1])?;
                }
            }
            LoadBlock { rank } | StoreBlock { rank } => {
                let store = matches!(op.kind, StoreBlock { .. });
                if *rank == 0 || *rank > 5 {
                    return Err("block rank must be 1 to 5".into());
                }
                n_in(1 + 3 * rank + store as usize)?;
                n_out(if store { 0 } else { 1 })?;
                let Elem::Ptr { pointee, mutable } = ot[0].elem else {
                    return Err("the base must be a pointer".into());
                };
                if !ot[0].is_scalar() {
                    return Err("the base must be one pointer".into());
                }
                if store && !mutable {
                    return Err("stores through a read-only pointer".into());
                }
                let index = ot[1].dtype().filter(|d| matches!(d, DType::I32 | DType::I64));
                let Some(index) = index else {
                    return Err("shape, strides and coordinates must be i32 or i64".into());
                };
                for t in &ot[1..1 + 3 * rank] {
                    same(t, &Type::scalar(index))?;
                }
                let block = if store { ot[1 + 3 * rank] } else { &rt[0] };
                if block.shape.len() != *rank || block.dtype() != Some(pointee) {
                    return Err(format!("a rank-{rank} block of {pointee} cannot be {block}"));
                }
            }
            AtomicCas { mask } => {
                n_in(3 + *mask as usize)?;
                n_out(1)?;
                let Elem::Ptr { pointee, mutable: true } = ot[0].elem else {
                    return Err("needs a writable pointer".into());
                };
                same(ot[1], &ot[0].with_dtype(pointee))?;
                same(ot[2], ot[1])?;
                same(&rt[0], ot[1])?;
            }
            Dot(_) => {
                n_in(3)?;
                n_out(1)?;
                let (a, b, c) = (&ot[0].shape, &ot[1].shape, &ot[2].shape);
                if a.len() != 2 || b.len() != 2 || a[1] != b[0] || *c != vec![a[0], b[1]] || ot[0].elem != ot[1].elem {
                    return Err(format!(
                        "shapes {}, {}, {} do not form a matrix product",
                        ot[0], ot[1], ot[2]
                    ));
                }
                same(ot[2], &rt[0])?;
            }
            Reduce { axis, op: r } => {
                n_in(1)?;
                n_out(1)?;
                let mut s = ot[0].shape.clone();
                if *axis >= s.len() {
                    return Err("axis out of range".into());
                }
                s.remove(*axis);
                if rt[0].shape != s {
                    return Err(format!("result shape should be {s:?}"));
                }
                let (d, r_d) = (
                    ot[0].dtype().ok_or("reduces numbers")?,
                    rt[0].dtype().ok_or("reduces numbers")?,
                );
                if !matches!(r, ReduceOp::Sum | ReduceOp::Prod) && d != r_d {
                    return Err("max/min/and/or/xor keep the input dtype".into());
                }
            }
            ClusterReduce(r) => {
                n_in(1)?;
                n_out(1)?;
                cluster_values()?;
                if !matches!(r, ReduceOp::Sum | ReduceOp::Max | ReduceOp::Min) {
                    return Err("cluster reductions are sum, max and min (others take `cluster_reduce_with`)".into());
                }
            }
            ArgReduce { axis, .. } => {
                n_in(1)?;
                n_out(1)?;
                let mut s = ot[0].shape.clone();
                if *axis >= s.len() {
                    return Err("axis out of range".into());
                }
                s.remove(*axis);
                same(&rt[0], &Type::tile(DType::I32, s))?;
            }
            ClusterReduceWith => {
                one_result_each()?;
                regions(1)?;
                cluster_values()?;
            }
            SplitSum => {
                n_in(1)?;
                n_out(1)?;
                if self.k.cluster <= 1 {
                    return Err("a split sum needs a kernel with `cluster(N)`, N > 1".into());
                }
                if ot[0].dtype() != Some(DType::F32) || ot[0].is_scalar() {
                    return Err("a split sum adds f32 tiles".into());
                }
                same(ot[0], &rt[0])?;
            }
            ReduceWith { axis } => {
                // Several tiles of one shape reduce together, one result each.
                one_result_each()?;
                regions(1)?;
                let mut s = ot[0].shape.clone();
                if *axis >= s.len() {
                    return Err("axis out of range".into());
                }
                s.remove(*axis);
                for (o, r) in ot.iter().zip(rt) {
                    if o.shape != ot[0].shape {
                        return Err("the tiles reduced together have different shapes".into());
                    }
                    same(r, &o.with_shape(s.clone()))?;
                }
            }
            Scan { axis, .. } | ScanWith { axis, .. } => {
                n_in(1)?;
                n_out(1)?;
                if *axis >= ot[0].shape.len() || rt[0].shape != ot[0].shape {
                    return Err("scan keeps the shape; axis out of range".into());
                }
                if matches!(op.kind, ScanWith { .. }) {
                    regions(1)?;
                    same(&rt[0], ot[0])?;
                }
            }
            For { .. } => {
                regions(1)?;
                if ot.len() < 3 {
                    return Err("takes start, end, step and the initial carried values".into());
                }
                same(ot[0], ot[1])?;
                same(ot[0], ot[2])?;
                if !ot[0].is_scalar() || !ot[0].dtype().is_some_and(|d| d.is_int()) {
                    return Err("bounds must be integer scalars".into());
                }
                if rt.len() != ot.len() - 3 {
                    return Err("one result per carried value".into());
                }
                for (r, i) in rt.iter().zip(&ot[3..]) {
                    same(r, i)?;
                }
            }
            If => {
                n_in(1)?;
                regions(2)?;
                same(ot[0], &Type::scalar(DType::Bool))?;
            }
            Yield => n_out(0)?,
            Print(_) => n_out(0)?,
            Assert(_) => {
                n_in(1)?;
                n_out(0)?;
                if ot[0].dtype() != Some(DType::Bool) {
                    return Err("asserts a bool".into());
                }
            }
        }
        Ok(())
    }
}
