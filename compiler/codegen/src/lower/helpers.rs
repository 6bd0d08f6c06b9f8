//! LLVM types, intrinsic calls and inline asm.

use inkwell::AddressSpace;
use inkwell::intrinsics::Intrinsic;
use inkwell::types::{BasicType, BasicTypeEnum};
use inkwell::values::{BasicMetadataValueEnum, BasicValueEnum, IntValue};
use tile_lang::ir::*;

use super::{GLOBAL, Lowering, R, llvm};
use crate::CodegenError;

impl<'c> Lowering<'c, '_> {
    pub(super) fn ty(&self, e: Elem) -> BasicTypeEnum<'c> {
        let c = self.ctx;
        match e {
            Elem::Ptr { .. } => c.ptr_type(AddressSpace::from(GLOBAL)).into(),
            Elem::Scalar(d) => match d {
                DType::Bool => c.bool_type().into(),
                DType::I8 | DType::U8 | DType::F8E4M3 | DType::F8E5M2 => c.i8_type().into(),
                DType::I16 | DType::U16 => c.i16_type().into(),
                DType::I32 | DType::U32 => c.i32_type().into(),
                DType::I64 | DType::U64 => c.i64_type().into(),
                DType::F16 => c.f16_type().into(),
                DType::BF16 => c.bf16_type().into(),
                DType::F32 => c.f32_type().into(),
                DType::F64 => c.f64_type().into(),
            },
        }
    }

    pub(super) fn int_type(&self, bits: u32) -> inkwell::types::IntType<'c> {
        match bits {
            8 => self.ctx.i8_type(),
            16 => self.ctx.i16_type(),
            32 => self.ctx.i32_type(),
            _ => self.ctx.i64_type(),
        }
    }

    pub(super) fn i32c(&self, v: u64) -> IntValue<'c> {
        self.ctx.i32_type().const_int(v, false)
    }

    /// Calls an LLVM intrinsic by name; a name LLVM does not know is an error, never a silent
    /// external function.
    pub(super) fn intr(
        &self,
        name: &str,
        types: &[BasicTypeEnum<'c>],
        args: &[BasicValueEnum<'c>],
    ) -> R<Option<BasicValueEnum<'c>>> {
        let i = Intrinsic::find(name).ok_or_else(|| CodegenError::Llvm(format!("LLVM has no intrinsic `{name}`")))?;
        let f = i
            .get_declaration(self.m, types)
            .ok_or_else(|| CodegenError::Llvm(format!("cannot declare `{name}`")))?;
        let args: Vec<BasicMetadataValueEnum> = args.iter().map(|a| (*a).into()).collect();
        let call = llvm(self.b.build_call(f, &args, ""))?;
        Ok(call.try_as_basic_value().basic())
    }

    pub(super) fn intr1(
        &self,
        name: &str,
        types: &[BasicTypeEnum<'c>],
        args: &[BasicValueEnum<'c>],
    ) -> R<BasicValueEnum<'c>> {
        self.intr(name, types, args)?
            .ok_or_else(|| CodegenError::Llvm(format!("`{name}` returns nothing")))
    }

    pub(super) fn asm(
        &self,
        ret: Option<BasicTypeEnum<'c>>,
        text: &str,
        constraints: &str,
        args: &[BasicValueEnum<'c>],
    ) -> R<Option<BasicValueEnum<'c>>> {
        self.asm_with(ret, text, constraints, args, true)
    }

    /// Inline asm that computes a value and does nothing else: LLVM may merge, move or drop it
    /// like any pure op, but cannot see through it.
    pub(super) fn pure_asm(
        &self,
        ret: BasicTypeEnum<'c>,
        text: &str,
        constraints: &str,
        args: &[BasicValueEnum<'c>],
    ) -> R<BasicValueEnum<'c>> {
        Ok(self.asm_with(Some(ret), text, constraints, args, false)?.unwrap())
    }

    fn asm_with(
        &self,
        ret: Option<BasicTypeEnum<'c>>,
        text: &str,
        constraints: &str,
        args: &[BasicValueEnum<'c>],
        side_effects: bool,
    ) -> R<Option<BasicValueEnum<'c>>> {
        let params: Vec<_> = args.iter().map(|a| a.get_type().into()).collect();
        let fty = match ret {
            Some(t) => t.fn_type(&params, false),
            None => self.ctx.void_type().fn_type(&params, false),
        };
        let asm = self.ctx.create_inline_asm(
            fty,
            text.to_string(),
            constraints.to_string(),
            side_effects,
            false,
            None,
            false,
        );
        let args: Vec<BasicMetadataValueEnum> = args.iter().map(|a| (*a).into()).collect();
        let call = llvm(self.b.build_indirect_call(fty, asm, &args, ""))?;
        Ok(call.try_as_basic_value().basic())
    }
}
