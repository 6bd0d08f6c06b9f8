//! The abstract syntax tree. Every node carries the byte span it was parsed from.

use crate::diag::Span;

#[derive(Clone, Debug, PartialEq)]
pub struct File {
    pub items: Vec<Item>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    Kernel(FnDef),
    Function(FnDef),
    Run(RunSpec),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Attribute {
    pub name: Ident,
    pub args: Vec<Expr>,
    pub span: Span,
}

/// A kernel or a helper function (helpers are inlined at every call).
#[derive(Clone, Debug, PartialEq)]
pub struct FnDef {
    pub attrs: Vec<Attribute>,
    pub name: Ident,
    pub consts: Vec<ConstParam>,
    pub params: Vec<Param>,
    pub ret: Option<TypeExpr>,
    pub body: Block,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ConstParam {
    pub name: Ident,
    pub ty: TypeExpr,
    pub value: ConstValueSpec,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ConstValueSpec {
    /// Must be given by the caller (`-D NAME=VALUE`, a run spec, the JIT).
    Required,
    Default(Expr),
    /// A tunable parameter: the optimizer chooses among these.
    Choices(Vec<Expr>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub name: Ident,
    pub ty: Option<TypeExpr>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum TypeExpr {
    Named(Ident),
    Ptr {
        mutable: bool,
        pointee: Box<TypeExpr>,
        span: Span,
    },
}

impl TypeExpr {
    pub fn span(&self) -> Span {
        match self {
            TypeExpr::Named(i) => i.span,
            TypeExpr::Ptr { span, .. } => *span,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct RunSpec {
    pub kernel: Ident,
    pub body: Block,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    pub stmts: Vec<Stmt>,
    pub tail: Option<Box<Expr>>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    Let {
        pattern: Pattern,
        ty: Option<TypeExpr>,
        value: Expr,
        span: Span,
    },
    Assign {
        target: Ident,
        op: Option<BinOp>,
        value: Expr,
        span: Span,
    },
    For(ForLoop),
    Expr {
        expr: Expr,
        semi: bool,
        span: Span,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct ForLoop {
    pub attrs: Vec<Attribute>,
    pub var: Ident,
    pub start: Expr,
    pub end: Expr,
    pub step: Option<Expr>,
    pub body: Block,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Pattern {
    Bind { name: Ident, mutable: bool },
    Tuple { items: Vec<Pattern>, span: Span },
    Wildcard(Span),
}

impl Pattern {
    pub fn span(&self) -> Span {
        match self {
            Pattern::Bind { name, .. } => name.span,
            Pattern::Tuple { span, .. } => *span,
            Pattern::Wildcard(s) => *s,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    Int(u128),
    Float(f64),
    Bool(bool),
    Str(String),
    Name(String),
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Call {
        func: Ident,
        args: Vec<Arg>,
    },
    Method {
        recv: Box<Expr>,
        name: Ident,
        args: Vec<Arg>,
    },
    Index {
        base: Box<Expr>,
        items: Vec<IndexItem>,
    },
    Paren(Box<Expr>),
    Tuple(Vec<Expr>),
    List(Vec<Expr>),
    If {
        cond: Box<Expr>,
        then: Block,
        els: Option<Box<Expr>>,
    },
    /// The block of an `else { .. }` branch.
    Block(Block),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Arg {
    pub name: Option<Ident>,
    pub value: Expr,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexItem {
    /// `:` keeps an axis.
    Full(Span),
    /// `None` inserts an axis of size 1.
    NewAxis(Span),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    Neg,
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Shl,
    Shr,
    BitAnd,
    BitOr,
    BitXor,
    LogicAnd,
    LogicOr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        use BinOp::*;
        match self {
            Add => "+",
            Sub => "-",
            Mul => "*",
            Div => "/",
            Rem => "%",
            Shl => "<<",
            Shr => ">>",
            BitAnd => "&",
            BitOr => "|",
            BitXor => "^",
            LogicAnd => "&&",
            LogicOr => "||",
            Eq => "==",
            Ne => "!=",
            Lt => "<",
            Le => "<=",
            Gt => ">",
            Ge => ">=",
        }
    }
}
